package main

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
	"github.com/pcp-exporter/pcp-exporter/internal/longtest"
)

// TestFollowPmlogger is the end-to-end test of follow mode: the real
// pmlogger logs the local pmcd every second into a directory, `serve
// --archive DIR` follows it, and the real Prometheus scrapes it every 2 s
// for more than 2 minutes, across a rotation (pmlogger stopped and a new
// archive started in the same directory, as pmlogger_daily does, this one
// switching to a new volume every 20 records). Then: every scrape has the
// metrics; each value equals, bit for bit, libpcp's interpolation on the
// recorded archives at the archive time that scrape served
// (pcp_exporter_source_served_timestamp_seconds of the same scrape), or
// where libpcp has none (the rotation's gap, after the stop, across a
// <mark>) the latest value recorded by then; the lag gauge stays within
// the delay plus one logging interval, except at scrapes whose window had
// no record at all (named, with the recording's gap); Prometheus sees no
// counter reset; and once pmlogger stops for good source_up turns 0 with
// reason "stalled" within the documented time (before that, only in a gap
// of the recording, named). Long (about 2.5 minutes): run with
// PCPX_LONG_TESTS=1 (CI sets CI=true), not under the race detector.
func TestFollowPmlogger(t *testing.T) {
	longtest.Skip(t, "2.5 minutes of pmlogger and Prometheus")
	if raceEnabled {
		// the follow path runs under the detector in the shorter follow
		// tests (TestFollowRestartAndStall, TestFollowStartedBetweenTicks)
		t.Skip("a 2.5-minute end-to-end run: not under the race detector")
	}
	t.Parallel() // waits on peers, not the CPU: beside the other end-to-end runs
	bins := e2e.Require(t, "pmlogger", "pminfo", "prometheus")
	py := "/usr/bin/python3"
	if out, err := exec.Command(py, "-c", "import cpmapi").CombinedOutput(); err != nil {
		if e2e.Mandatory() {
			t.Fatalf("python3-pcp: %v\n%s", err, out)
		}
		t.Skipf("python3-pcp not installed: %v", err)
	}
	e2e.RequirePMCD(t)
	const (
		scrape   = 2 * time.Second
		interval = time.Second
		// the default delay: one logging interval plus 1 s
		delay = interval + time.Second
		// stalled after 3 logging intervals plus 2 s without a record,
		// seen at the next scrape
		stallAfter  = 3*interval + 2*time.Second
		stallWithin = stallAfter + scrape + time.Second
		// pmlogger writes a record within 0.25 s of its time
		// (archive.FollowMargin); the checks allow it 1 s
		written = time.Second
	)
	dir := t.TempDir()
	arch := filepath.Join(dir, "host")
	if err := os.Mkdir(arch, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "pmlogger.config")
	metrics := []string{"kernel.all.cpu.user", "kernel.all.cpu.sys", "mem.util.used"}
	if err := os.WriteFile(cfg, []byte("log mandatory on 1 sec {\n    "+strings.Join(metrics, "\n    ")+"\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	logger := func(n int) *exec.Cmd {
		name := filepath.Join(arch, time.Now().UTC().Format("20060102.15.04.05"))
		args := []string{"-t", "1", "-c", cfg, "-l", filepath.Join(dir, fmt.Sprintf("pmlogger%d.log", n))}
		if n == 2 {
			args = append(args, "-v", "20") // a new volume every 20 records
		}
		cmd := exec.Command(bins[0], append(args, name)...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	stop := func(cmd *exec.Cmd) {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}
	pl := logger(1)
	time.Sleep(4 * time.Second)

	addr := e2e.FreeAddr(t)
	out := startExporter(t, http.DefaultClient, "http://"+addr, "serve", "--web.listen-address="+addr, "--archive="+arch,
		"--replay.interp=prior") // the rule of the installed libpcp (6.0.3)
	prom := e2e.StartPrometheus(t, fmt.Sprintf(`global:
  scrape_interval: %s
scrape_configs:
  - job_name: pcp
    static_configs:
      - targets: [%q]
`, scrape, addr), "")
	begin := time.Now()
	time.Sleep(70 * time.Second)
	// rotation: pmlogger stopped, a new archive started in the directory
	stop(pl)
	rotated := time.Now()
	pl = logger(2)
	time.Sleep(65 * time.Second)
	stop(pl)
	stopped := time.Now()
	time.Sleep(stallWithin + 2*time.Second)
	end := time.Now()

	window := fmt.Sprintf("[%ds]", int(end.Sub(begin).Seconds())+10)
	samples := func(q string) map[string][][2]float64 {
		out := map[string][][2]float64{}
		for _, s := range e2e.PromQuery(t, prom, q+window, end) {
			var key []string
			for k, v := range s.Metric {
				key = append(key, k+"="+v)
			}
			sort.Strings(key)
			var vs [][2]float64
			for _, p := range s.Values {
				v, _ := strconv.ParseFloat(p[1].(string), 64)
				vs = append(vs, [2]float64{p[0].(float64), v})
			}
			out[strings.Join(key, ",")] = vs
		}
		return out
	}
	one := func(q string) [][2]float64 {
		m := samples(q)
		if len(m) != 1 {
			t.Fatalf("%s: %d series, want 1\n%s", q, len(m), out)
		}
		for _, v := range m {
			return v
		}
		return nil
	}
	ups := one(`up{job="pcp"}`)
	if len(ups) < 60 || ups[len(ups)-1][0]-ups[0][0] < 120 {
		t.Fatalf("%d scrapes over %.0f s, want 60 over 2 minutes at least", len(ups), ups[len(ups)-1][0]-ups[0][0])
	}
	user, sys, used := one("kernel_all_cpu_user_seconds_total"), one("kernel_all_cpu_sys_seconds_total"), one("mem_util_used_bytes")
	for name, s := range map[string][][2]float64{"user": user, "sys": sys, "used": used} {
		if len(s) != len(ups) {
			t.Errorf("%s: %d samples in %d scrapes: a scrape lacked the metric", name, len(s), len(ups))
		}
	}
	var resets []string
	for _, q := range []string{"kernel_all_cpu_user_seconds_total", "kernel_all_cpu_sys_seconds_total"} {
		r := e2e.PromQuery(t, prom, "resets("+q+window+")", end)
		if len(r) != 1 || r[0].Value[1] != "0" {
			t.Errorf("resets(%s) = %v, want 0", q, r)
			continue
		}
		resets = append(resets, fmt.Sprintf("resets(%s) %v", q, r[0].Value[1]))
	}
	// what each scrape served: the archive time and the lag, sent in the
	// same scrape as the values (so stored with the same timestamp)
	servedAt, lags := map[float64]float64{}, map[float64]float64{}
	for _, p := range one("pcp_exporter_source_served_timestamp_seconds") {
		servedAt[p[0]] = p[1]
	}
	for _, p := range one("pcp_exporter_source_lag_seconds") {
		lags[p[0]] = p[1]
	}
	stamp := func(x float64) string { return fmt.Sprintf("%.6f", x) } // the served time is to the microsecond
	var times bytes.Buffer
	for _, p := range ups {
		_, ok1 := servedAt[p[0]]
		_, ok2 := lags[p[0]]
		if !ok1 || !ok2 {
			t.Fatalf("the scrape at %.3f lacks the served time or the lag\n%s", p[0], out)
		}
		fmt.Fprintln(&times, stamp(servedAt[p[0]]))
	}

	// libpcp on the recorded archives, each in a context of its own, as
	// the exporter follows them (libpcp 6.0.3's context over the directory
	// answers no counter value at every other time of the first archive
	// when the second has several volumes)
	metas, _ := filepath.Glob(filepath.Join(arch, "*.meta"))
	if len(metas) != 2 {
		t.Fatalf("%d archives in %s, want 2", len(metas), arch)
	}
	type answers struct {
		start float64
		// metric -> time -> value: asked in turn in one context
		// (pmSetMode, then pmFetch: libpcp positions anew each time but
		// keeps its read cache), and in a new context where that had none
		at, fresh map[string]map[string]string
	}
	var archives []answers
	type obs struct {
		t float64
		v string
	}
	recorded := map[string][]obs{} // metric -> its recorded values
	var recs []float64             // the time of every record of both archives
	var marks []float64            // the time of every <mark>
	var raw []byte
	for _, m := range metas {
		cmd := exec.Command(py, append([]string{"testdata/libpcp_at.py", strings.TrimSuffix(m, ".meta")}, metrics...)...)
		cmd.Stdin = bytes.NewReader(times.Bytes())
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("libpcp_at.py %s: %v", m, err)
		}
		raw = append(raw, out...)
		a := answers{at: map[string]map[string]string{}, fresh: map[string]map[string]string{}}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) == 2 && f[0] == "start":
				a.start, _ = strconv.ParseFloat(f[1], 64)
			case len(f) == 2 && f[0] == "rec":
				tm, _ := strconv.ParseFloat(f[1], 64)
				recs = append(recs, tm)
			case len(f) == 2 && f[0] == "mark":
				tm, _ := strconv.ParseFloat(f[1], 64)
				marks = append(marks, tm)
			case len(f) >= 4 && (f[0] == "at" || f[0] == "fresh") && f[3] != "none":
				m := a.at
				if f[0] == "fresh" {
					m = a.fresh
				}
				if m[f[2]] == nil {
					m[f[2]] = map[string]string{}
				}
				m[f[2]][f[1]] = f[3]
			case len(f) == 4 && f[0] == "raw":
				tm, _ := strconv.ParseFloat(f[1], 64)
				recorded[f[2]] = append(recorded[f[2]], obs{tm, f[3]})
			}
		}
		archives = append(archives, a)
	}
	sort.Slice(archives, func(i, j int) bool { return archives[i].start < archives[j].start })
	sort.Float64s(recs)
	isRecord := map[string]bool{}
	for _, r := range recs {
		isRecord[stamp(r)] = true
	}
	for _, r := range recorded {
		sort.Slice(r, func(i, j int) bool { return r[i].t < r[j].t })
	}
	// recordsIn returns the records from lo to hi, and the last one
	// before lo and the first after hi
	recordsIn := func(lo, hi float64) (in []string, prev, next float64) {
		prev, next = math.Inf(-1), math.Inf(1)
		for _, r := range recs {
			switch {
			case r < lo:
				prev = r
			case r <= hi:
				in = append(in, stamp(r))
			case math.IsInf(next, 1):
				next = r
			}
		}
		return in, prev, next
	}
	// expected is libpcp's interpolation at the served time s in the
	// archive followed then (the latest one started by s): that of the
	// context asked in turn, else that of a new context ("fresh": libpcp
	// 6.0.3's answers can depend on the reads before), else ("latest")
	// the latest value recorded at or before s. Between the records on
	// either side of a <mark> (pmcd restarted an agent, or itself: counters
	// may have reset; other tests restart the shared pmcd) it is the
	// latest value ("mark"): libpcp reading on from an earlier time, as
	// pmval -t does and as the exporter does, has no value across a mark,
	// while pmSetMode at that time alone positions from the index with
	// marks ignored and interpolates across it (checked with python3-pcp
	// on such an archive: 9533412 alone, none reading on).
	latestBy := func(metric string, s float64) (v string, ok bool) {
		for _, o := range recorded[metric] {
			if o.t > s {
				break
			}
			v, ok = o.v, true
		}
		return v, ok
	}
	expected := func(metric string, s float64) (v, from string, ok bool) {
		for _, m := range marks {
			prev, next := math.Inf(-1), math.Inf(1)
			for _, o := range recorded[metric] {
				if o.t < m {
					prev = o.t
				} else if o.t > m {
					next = o.t
					break
				}
			}
			if prev < s && s < next {
				v, ok := latestBy(metric, s)
				return v, "mark", ok
			}
		}
		var a *answers
		for i := range archives {
			if archives[i].start <= s {
				a = &archives[i]
			}
		}
		if a != nil {
			if v, ok := a.at[metric][stamp(s)]; ok {
				return v, "", true
			}
			if v, ok := a.fresh[metric][stamp(s)]; ok {
				return v, "fresh", true
			}
		}
		v, ok = latestBy(metric, s)
		return v, "latest", ok
	}

	// every value served equals libpcp's bit for bit, converted as the
	// mapping converts (v*Mul/Div: msec to seconds, Kbyte to bytes)
	checked, latest, fresh, inMark := 0, 0, 0, 0
	latestAt, freshAt, markAt := map[float64]bool{}, map[float64]bool{}, map[float64]bool{} // those scrapes
	since := func(ts float64) string { return fmt.Sprintf("+%.1f", ts-float64(begin.UnixNano())/1e9) }
	offsets := func(tss []float64) string {
		var o []string
		for _, ts := range tss {
			o = append(o, since(ts))
		}
		return strings.Join(o, ",")
	}
	for _, c := range []struct {
		metric string
		served [][2]float64
		conv   func(float64) float64
	}{
		{"kernel.all.cpu.user", user, func(x float64) float64 { return x * (1.0 / 1000) }}, // pmConvScale: v * (mult/div)
		{"kernel.all.cpu.sys", sys, func(x float64) float64 { return x * (1.0 / 1000) }},
		{"mem.util.used", used, func(x float64) float64 { return x * 1024 }},
	} {
		for _, p := range c.served {
			s := servedAt[p[0]]
			v, from, ok := expected(c.metric, s)
			if !ok {
				t.Errorf("%s scraped at %s s: libpcp has no value at or before the served time %s", c.metric, since(p[0]), stamp(s))
				continue
			}
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Errorf("%s: libpcp's value %q: %v", c.metric, v, err)
				continue
			}
			if want := c.conv(x); p[1] != want {
				t.Errorf("%s scraped at %s s, served time %s: %v, libpcp %s (%v%s)", c.metric, since(p[0]), stamp(s), p[1], v, want, from)
			}
			checked++
			switch from {
			case "latest":
				latest++
				latestAt[p[0]] = true
			case "fresh":
				fresh++
				freshAt[p[0]] = true
			case "mark":
				inMark++
				markAt[p[0]] = true
			}
		}
	}

	// the lag, while pmlogger wrote (after it stopped the lag grows): at
	// most the delay plus one logging interval, except where the recording
	// itself has no record in the interval before the read's time minus
	// the delay (pmlogger recorded nothing: pmcd restarting, or answering
	// late on a loaded host). A lag over the delay means the served time
	// was clipped to the latest record: it must be a record's time.
	d, iv := delay.Seconds(), interval.Seconds()
	stoppedAt := float64(stopped.UnixNano()) / 1e9
	maxLag, maxBound := 0.0, 0.0
	bound, afterStop := 0, 0
	var clipped []float64
	var excused []string
	for _, p := range ups {
		s, lag := servedAt[p[0]], lags[p[0]]
		read := s + lag // the wall time of the read
		if lag > d+0.01 {
			clipped = append(clipped, p[0])
			if !isRecord[stamp(s)] {
				t.Errorf("scrape at %s s: lag %.6f s over the delay, but the served time %s is no record's time", since(p[0]), lag, stamp(s))
			}
		}
		if read > stoppedAt {
			afterStop++
			continue
		}
		maxLag = math.Max(maxLag, lag)
		if lag <= d+iv {
			bound++
			maxBound = math.Max(maxBound, lag)
			continue
		}
		lo, hi := read-d-iv, read-d
		in, prev, next := recordsIn(lo, hi)
		if len(in) > 0 {
			t.Errorf("scrape at %s s: lag %.3f s, over the delay plus one interval (%v), though the archive has records %v between %s and %s (served %s)", since(p[0]), lag, delay+interval, in, stamp(lo), stamp(hi), stamp(s))
			continue
		}
		excused = append(excused, fmt.Sprintf("%s s (lag %.3f s; no record from %s to %s, a gap of %.3f s)", since(p[0]), lag, stamp(prev), stamp(next), next-prev))
	}
	if maxLag < d {
		t.Errorf("lag up to %.3f s, want the delay %v at least", maxLag, delay)
	}

	// stalled within the documented time of pmlogger's stop; before it
	// only at a read whose last stallAfter holds no record written by then
	// (one with a time from read-stallAfter+written to read-written would
	// have been read, and the archive would have grown)
	stalledAt := math.NaN()
	var stalledBefore []string
	for key, ss := range samples("pcp_exporter_source_up") {
		if !strings.Contains(key, "reason=stalled") {
			continue
		}
		for _, p := range ss {
			if p[1] != 0 {
				t.Errorf("source_up{reason=stalled} = %v", p[1])
			}
			read := servedAt[p[0]] + lags[p[0]]
			if read > stoppedAt {
				if math.IsNaN(stalledAt) || p[0] < stalledAt {
					stalledAt = p[0]
				}
				continue
			}
			in, prev, next := recordsIn(read-stallAfter.Seconds()+written.Seconds(), read-written.Seconds())
			if len(in) > 0 {
				t.Errorf("stalled at %s s, before pmlogger stopped, though the archive has records %v", since(p[0]), in)
				continue
			}
			stalledBefore = append(stalledBefore, fmt.Sprintf("%s s (no record from %s to %s, a gap of %.3f s)", since(p[0]), stamp(prev), stamp(next), next-prev))
		}
	}
	if math.IsNaN(stalledAt) {
		t.Errorf("source_up never turned 0 with reason stalled after pmlogger stopped")
	} else if d := stalledAt - stoppedAt; d > stallWithin.Seconds() || d < 0 {
		t.Errorf("stalled %.1f s after pmlogger stopped, want within %v", d, stallWithin)
	}
	t.Logf("scrapes: %d over %.0f s (rotation at +%.0f s, stop at +%.0f s), each with the 3 metrics, the served time and the lag; across the rotation %s",
		len(ups), ups[len(ups)-1][0]-ups[0][0], rotated.Sub(begin).Seconds(), stopped.Sub(begin).Seconds(), strings.Join(resets, ", "))
	t.Logf("values: %d checked bit for bit against libpcp at each scrape's served time: %d interpolated by libpcp, %d of them only by a new context (scrapes at %s s), %d the latest recorded value where libpcp has none (scrapes at %s s), %d the latest recorded value in a <mark> gap (%d marks; scrapes at %s s); %d scrapes served the latest record (lag over the delay: at %s s), each at a record's time",
		checked, checked-latest-inMark, fresh, offsets(slices.Sorted(maps.Keys(freshAt))), latest, offsets(slices.Sorted(maps.Keys(latestAt))), inMark, len(marks), offsets(slices.Sorted(maps.Keys(markAt))), len(clipped), offsets(clipped))
	t.Logf("lag: up to %.3f s over %d scrapes while pmlogger wrote; within the delay plus one interval (%v) at %d (up to %.3f s); %d excused%s; %d scrapes after the stop not bound",
		maxLag, bound+len(excused), delay+interval, bound, maxBound, len(excused), strings.Join(append([]string{""}, excused...), "; "), afterStop)
	t.Logf("stalled %.1f s after the stop (documented: within %v); %d scrapes stalled before it, each in a gap of the recording%s",
		stalledAt-stoppedAt, stallWithin, len(stalledBefore), strings.Join(append([]string{""}, stalledBefore...), "; "))
	if t.Failed() {
		t.Logf("exporter log:\n%s", out)
	}
	// PCPX_KEEP=DIR keeps the archives, libpcp's answers and the scrapes
	if keep := os.Getenv("PCPX_KEEP"); keep != "" {
		exec.Command("cp", "-r", arch, keep).Run()
		os.WriteFile(filepath.Join(keep, "libpcp.txt"), raw, 0o644)
		var b strings.Builder
		for i, p := range ups {
			fmt.Fprintf(&b, "%.3f served %s lag %v", p[0], stamp(servedAt[p[0]]), lags[p[0]])
			if i < len(user) && i < len(sys) && i < len(used) {
				fmt.Fprintf(&b, " user %v sys %v used %v", user[i][1], sys[i][1], used[i][1])
			}
			b.WriteString("\n")
		}
		os.WriteFile(filepath.Join(keep, "scrapes.txt"), []byte(b.String()), 0o644)
	}
}

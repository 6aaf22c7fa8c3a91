package main

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
)

// TestFollowPmlogger is the end-to-end test of follow mode: the real
// pmlogger logs the local pmcd every second into a directory, `serve
// --archive DIR` follows it, and the real Prometheus scrapes it every 2 s
// for more than 2 minutes, across a rotation (pmlogger stopped and a new
// archive started in the same directory, as pmlogger_daily does, this one
// switching to a new volume every 20 records). Then:
// every scrape has the metrics, with the value libpcp interpolates at the
// scrape's time minus the delay on the recorded archives (the latest
// recorded value where libpcp has none: the rotation's gap); the lag gauge
// stays within the delay plus one logging interval; Prometheus sees no
// counter reset; and once pmlogger stops for good source_up turns 0 with
// reason "stalled" within the documented time. Long (about 2.5 minutes):
// run with PCPX_LONG_TESTS=1 (CI sets CI=true).
func TestFollowPmlogger(t *testing.T) {
	if os.Getenv("PCPX_LONG_TESTS") == "" && os.Getenv("CI") != "true" {
		t.Skip("2.5 minutes of pmlogger and Prometheus: set PCPX_LONG_TESTS=1")
	}
	bins := e2e.Require(t, "pmlogger", "pminfo", "prometheus")
	py := "/usr/bin/python3"
	if out, err := exec.Command(py, "-c", "import cpmapi").CombinedOutput(); err != nil {
		if e2e.Mandatory() {
			t.Fatalf("python3-pcp: %v\n%s", err, out)
		}
		t.Skipf("python3-pcp not installed: %v", err)
	}
	if out, err := exec.Command(bins[1], "-f", "pmcd.version").CombinedOutput(); err != nil {
		if e2e.Mandatory() {
			t.Fatalf("pmcd is not answering: %v\n%s", err, out)
		}
		t.Skipf("pmcd is not answering: %v", err)
	}
	const (
		scrape   = 2 * time.Second
		interval = time.Second
		// the default delay: one logging interval plus 1 s
		delay = interval + time.Second
		// stalled after 3 logging intervals plus 2 s without a record,
		// seen at the next scrape
		stallWithin = 3*interval + 2*time.Second + scrape + time.Second
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
	for _, q := range []string{"kernel_all_cpu_user_seconds_total", "kernel_all_cpu_sys_seconds_total"} {
		r := e2e.PromQuery(t, prom, "resets("+q+window+")", end)
		if len(r) != 1 || r[0].Value[1] != "0" {
			t.Errorf("resets(%s) = %v, want 0", q, r)
		}
	}
	// stalled within the documented time of pmlogger's stop
	var stalledAt float64
	for key, s := range samples("pcp_exporter_source_up") {
		if strings.Contains(key, "reason=stalled") && len(s) > 0 {
			stalledAt = s[0][0]
			if s[0][1] != 0 {
				t.Errorf("source_up{reason=stalled} = %v", s[0][1])
			}
		}
	}
	if stalledAt == 0 {
		t.Errorf("source_up never turned 0 with reason stalled\n%s", out)
	} else if d := stalledAt - float64(stopped.UnixMilli())/1e3; d > stallWithin.Seconds() || d < 0 {
		t.Errorf("stalled %.1f s after pmlogger stopped, want within %v", d, stallWithin)
	}

	// libpcp's values on the recorded archives at each scrape's served
	// time: the read's time minus the lag it reported, the read being
	// between Prometheus's timestamp of the scrape and readLate after it
	const readLate = 0.5
	lags := map[float64]float64{}
	for _, p := range one("pcp_exporter_source_lag_seconds") {
		lags[p[0]] = p[1]
	}
	servedAt := func(scraped float64) (lo, hi float64) {
		lag, ok := lags[scraped]
		if !ok {
			t.Fatalf("no lag in the scrape at %.3f", scraped)
		}
		return scraped - lag - 0.001, scraped - lag + readLate
	}
	var times bytes.Buffer
	for _, p := range user {
		lo, hi := servedAt(p[0])
		fmt.Fprintf(&times, "%.6f\n%.6f\n", lo, hi)
	}
	// each archive in a context of its own, as the exporter follows them
	// (libpcp 6.0.3's context over the directory answers no counter value
	// at every other time of the first archive when the second has several
	// volumes)
	metas, _ := filepath.Glob(filepath.Join(arch, "*.meta"))
	if len(metas) != 2 {
		t.Fatalf("%d archives in %s, want 2", len(metas), arch)
	}
	at := map[string]map[string]float64{} // metric -> time -> value (none: absent)
	type obs struct{ t, v float64 }
	recorded := map[string][]obs{}
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
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 4 {
				continue
			}
			if at[f[2]] == nil {
				at[f[2]] = map[string]float64{}
			}
			v, err := strconv.ParseFloat(f[3], 64)
			switch {
			case f[0] == "at" && err == nil:
				at[f[2]][f[1]] = v
			case f[0] == "raw" && err == nil:
				tm, _ := strconv.ParseFloat(f[1], 64)
				recorded[f[2]] = append(recorded[f[2]], obs{tm, v})
			}
		}
	}
	for _, r := range recorded {
		sort.Slice(r, func(i, j int) bool { return r[i].t < r[j].t })
	}
	// expected is libpcp's interpolation at tm, or where it has none the
	// last recorded value before tm (the latest values)
	expected := func(metric string, tm float64) (float64, bool) {
		if v, ok := at[metric][fmt.Sprintf("%.6f", tm)]; ok {
			return v, true
		}
		var last float64
		found := false
		for _, o := range recorded[metric] {
			if o.t > tm {
				break
			}
			last, found = o.v, true
		}
		return last, found
	}
	// the lag, while pmlogger wrote (after it stopped the lag grows): at
	// most the delay plus one logging interval, unless pmlogger itself
	// recorded nothing then (on a loaded host pmcd's answers come late:
	// the next record after the served time is 1.5 intervals or more
	// after it)
	maxLag, gaps := 0.0, 0
	for _, p := range one("pcp_exporter_source_lag_seconds") {
		if p[0] > float64(stopped.UnixMilli())/1e3 {
			break
		}
		maxLag = math.Max(maxLag, p[1])
		if p[1] <= (delay + interval).Seconds() {
			continue
		}
		servedT := p[0] - p[1]
		next := math.Inf(1)
		for _, o := range recorded["kernel.all.cpu.user"] {
			if o.t > servedT+0.002 {
				next = o.t
				break
			}
		}
		if next-servedT < 1.5*interval.Seconds() {
			t.Errorf("lag %.3f s at %.3f, want at most %v: the next record (%.3f) followed the served time by %.3f s", p[1], p[0], delay+interval, next, next-servedT)
		} else {
			gaps++
		}
	}
	if maxLag < delay.Seconds() {
		t.Errorf("lag up to %.3f s, want the delay %v at least", maxLag, delay)
	}
	checked, latest := 0, 0
	var latestAt []string // offsets of those scrapes from the start
	for _, c := range []struct {
		metric string
		served [][2]float64
		scale  float64
	}{{"kernel.all.cpu.user", user, 1e-3}, {"kernel.all.cpu.sys", sys, 1e-3}, {"mem.util.used", used, 1024}} {
		for _, p := range c.served {
			lo, hi := servedAt(p[0])
			vlo, ok1 := expected(c.metric, lo)
			vhi, ok2 := expected(c.metric, hi)
			if !ok1 || !ok2 {
				t.Errorf("%s at %.3f: libpcp has no value before %.3f", c.metric, p[0], lo)
				continue
			}
			if _, ok := at[c.metric][fmt.Sprintf("%.6f", lo)]; !ok {
				latest++
				latestAt = append(latestAt, fmt.Sprintf("%.0f", p[0]-float64(begin.UnixMilli())/1e3))
			}
			got := p[1] / c.scale
			if got < math.Min(vlo, vhi)-1e-6*math.Abs(got) || got > math.Max(vlo, vhi)+1e-6*math.Abs(got) {
				t.Errorf("%s scraped at %.3f: %v, libpcp between %v (%.3f) and %v (%.3f)", c.metric, p[0], got, vlo, lo, vhi, hi)
			}
			checked++
		}
	}
	t.Logf("%d scrapes over %.0f s (rotation at +%.0f s, stop at +%.0f s); %d values checked against libpcp (%d where libpcp has none, the latest recorded, at +%s s); lag up to %.3f s (%d scrapes over delay+interval, each in a gap of pmlogger's recording); stalled %.1f s after the stop",
		len(ups), ups[len(ups)-1][0]-ups[0][0], rotated.Sub(begin).Seconds(), stopped.Sub(begin).Seconds(), checked, latest, strings.Join(latestAt, ","), maxLag, gaps, stalledAt-float64(stopped.UnixMilli())/1e3)
	if t.Failed() {
		t.Logf("exporter log:\n%s", out)
		if keep := os.Getenv("PCPX_KEEP"); keep != "" {
			exec.Command("cp", "-r", arch, keep).Run()
			os.WriteFile(filepath.Join(keep, "libpcp.txt"), raw, 0o644)
			var b strings.Builder
			for _, p := range user {
				fmt.Fprintf(&b, "%.3f %v %v\n", p[0], p[1], lags[p[0]])
			}
			os.WriteFile(filepath.Join(keep, "scrapes.txt"), []byte(b.String()), 0o644)
		}
	}
}

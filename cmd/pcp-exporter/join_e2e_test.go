package main

import (
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
)

// TestBackfillJoinsScrape is the end-to-end test of joining history with
// live data, done as a user does it: the corpus `live` archive is cut at a
// boundary T (one of its records); `backfill --finish T --label job=J
// --label instance=I` writes the part up to T into TSDB blocks, the real
// Prometheus starts on them and scrapes `serve --archive ... --replay.start
// T` as job J at address I. Then every series of job J (but Prometheus's
// own up/scrape_* and the exporter's self-metrics) must have samples on
// both sides of the boundary: a scraped series with a label the backfilled
// one lacks (or the reverse) would be two series, each on one side only.
//
// Continuity: a replay's first scrape serves archive time T, the time of
// the backfill's last record, so the first scraped value of every series
// must equal its last backfilled value (with --replay.interp=prior an
// instant or discrete metric takes its last value at or before T, as the
// raw backfill does; a counter interpolated at a record's time is that
// record). Two counters are checked against libpcp's own answer at T
// (records.csv) by hand, and Prometheus must count no counter reset over
// the whole joined range. Timestamps are not compared: the scraped samples
// carry scrape times (now), the backfilled ones archive times (the
// recording's day). A user joining history with live data serves the live
// host (or follows the archive pmlogger is writing), whose times continue
// the recorded ones, so no time shift is needed; only this replay of an old
// recording leaves a gap in time between the two parts.
func TestBackfillJoinsScrape(t *testing.T) {
	t.Parallel() // waits on peers, not the CPU: beside the other end-to-end runs
	e2e.Require(t, "prometheus")
	const (
		job   = "pcp-join"
		bound = "2026-11-22T08:58:27.416208Z" // a record of every 1 s metric, 60 s into the archive
	)
	boundary, _ := time.Parse(time.RFC3339Nano, bound)
	arch := filepath.Join(corpus, "archives", "live", "live")
	addr := e2e.FreeAddr(t)
	data := t.TempDir()

	backfillCLI(t, "--output=tsdb:"+data, "--finish="+bound, "--label=job="+job, "--label=instance="+addr, arch)

	base := "http://" + addr
	startExporter(t, http.DefaultClient, base, "serve", "--web.listen-address="+addr, "--archive="+arch,
		"--replay.start="+bound, "--replay.interp=prior")
	begin := time.Now()
	prom := e2e.StartPrometheus(t, fmt.Sprintf(`global:
  scrape_interval: 1s
scrape_configs:
  - job_name: %q
    static_configs:
      - targets: [%q]
`, job, addr), data)

	scrapes := waitScrapes(t, prom, job, 4)
	end := time.Now()
	window := fmt.Sprintf("[%ds]", int(end.Sub(boundary).Seconds())+600)

	type side struct {
		n           int
		first, last float64 // values
		firstT      float64
		lastT       float64
	}
	type series struct{ before, after side }
	all := map[string]*series{}
	names := map[string]bool{}
	for _, s := range e2e.PromQuery(t, prom, fmt.Sprintf(`{job=%q}%s`, job, window), end) {
		name := s.Metric["__name__"]
		if selfMetric(name) {
			continue
		}
		if s.Metric["instance"] != addr {
			t.Errorf("series with instance %q: %v", s.Metric["instance"], s.Metric)
		}
		names[name] = true
		var labels []string
		for k, v := range s.Metric {
			labels = append(labels, k+"="+strconv.Quote(v))
		}
		sort.Strings(labels)
		key := "{" + strings.Join(labels, ",") + "}"
		if all[key] != nil {
			t.Fatalf("series %s returned twice", key)
		}
		ser := &series{}
		all[key] = ser
		for _, p := range s.Values {
			at, _ := strconv.ParseFloat(fmt.Sprint(p[0]), 64)
			v, err := strconv.ParseFloat(fmt.Sprint(p[1]), 64)
			if err != nil {
				t.Fatalf("%s: value %v", key, p[1])
			}
			sd := &ser.after
			if at <= float64(boundary.UnixMilli())/1000 {
				sd = &ser.before
			} else if at < float64(begin.Unix()) {
				t.Errorf("%s: a sample at %v, between the boundary and the first scrape", key, at)
				continue
			}
			if sd.n == 0 {
				sd.first, sd.firstT = v, at
			}
			sd.n++
			sd.last, sd.lastT = v, at
		}
	}
	// the continuity check below needs the first scrape (the one serving
	// the boundary) stored
	if up := e2e.PromQuery(t, prom, fmt.Sprintf(`up{job=%q}%s`, job, window), end); len(up) != 1 || len(up[0].Values) == 0 || fmt.Sprint(up[0].Values[0][1]) != "1" {
		t.Fatalf("the first scrape failed: up = %+v", up)
	}
	if len(all) < 20 {
		t.Fatalf("only %d series of job %s", len(all), job)
	}
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s := all[k]
		switch {
		case s.before.n == 0:
			t.Errorf("%s: scraped only (%d samples), no backfilled sample: a duplicate of a backfilled series?", k, s.after.n)
		case s.after.n == 0:
			t.Errorf("%s: backfilled only (%d samples), not scraped: a duplicate of a scraped series?", k, s.before.n)
		case strings.Contains(k, `_total"`) && s.before.lastT != float64(boundary.UnixMilli())/1000:
			t.Errorf("%s: last backfilled sample at %v, want the boundary %v", k, s.before.lastT, float64(boundary.UnixMilli())/1000)
		case s.after.first != s.before.last:
			t.Errorf("%s: first scraped value %v, last backfilled value %v: not continuous at the boundary", k, s.after.first, s.before.last)
		}
	}
	t.Logf("%d series of %d metrics joined; %d scrapes", len(all), len(names), scrapes)
	if s := all[`{__name__="kernel_all_cpu_user_seconds_total",instance=`+strconv.Quote(addr)+`,job=`+strconv.Quote(job)+`}`]; s == nil || !(s.after.last > s.after.first) {
		t.Errorf("kernel_all_cpu_user_seconds_total did not advance in the replay: %+v", s)
	}

	// libpcp's values at the boundary (records.csv, sample 70), in base
	// units: kernel.all.cpu.user 1458670 ms, disk.dev.read_bytes[vda]
	// 3536961 Kbyte
	for q, want := range map[string]float64{
		`kernel_all_cpu_user_seconds_total`:         1458.670,
		`disk_dev_read_bytes_total{instname="vda"}`: 3536961 * 1024,
	} {
		sel := strings.Replace(q, "{", fmt.Sprintf("{job=%q,", job), 1)
		if !strings.Contains(sel, "{") {
			sel += fmt.Sprintf("{job=%q}", job)
		}
		got := 0
		for k, s := range all {
			if !matches(k, sel) {
				continue
			}
			got++
			if math.Abs(s.after.first-want) > 1e-9*want || math.Abs(s.before.last-want) > 1e-9*want {
				t.Errorf("%s: backfilled %v, scraped %v at the boundary; libpcp %v", k, s.before.last, s.after.first, want)
			}
		}
		if got != 1 {
			t.Errorf("%s: %d series, want 1", sel, got)
		}
	}

	// no counter reset across the join, as Prometheus counts them
	counters := 0
	for n := range names {
		if !strings.HasSuffix(n, "_total") {
			continue
		}
		counters++
		for _, r := range e2e.PromQuery(t, prom, fmt.Sprintf(`resets(%s{job=%q}%s) > 0`, n, job, window), end) {
			t.Errorf("%s: counter reset in the joined series %v", n, r.Metric)
		}
	}
	if counters < 5 {
		t.Errorf("only %d counters", counters)
	}
}

// selfMetric reports whether a series of the scrape job is Prometheus's
// own (up, scrape_*) or the exporter's (its self-metrics and Go
// collectors), which a backfill does not write.
func selfMetric(name string) bool {
	if name == "up" {
		return true
	}
	for _, p := range []string{"scrape_", "pcp_exporter_", "go_", "process_", "promhttp_"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// matches reports whether the series key (sorted name="value" pairs)
// holds every matcher of sel, a selector name{l="v",...}.
func matches(key, sel string) bool {
	name, rest, _ := strings.Cut(sel, "{")
	if !strings.Contains(key, `__name__=`+strconv.Quote(name)+`,`) && !strings.Contains(key, `__name__=`+strconv.Quote(name)+`}`) {
		return false
	}
	for _, m := range strings.Split(strings.TrimSuffix(rest, "}"), ",") {
		l, v, _ := strings.Cut(m, "=")
		if !strings.Contains(key, l+"="+v) {
			return false
		}
	}
	return true
}

// TestBackfillJoinsFollow joins history with live data as a user does on a
// host: the real pmlogger logs the local pmcd every second; the archive it
// is writing is backfilled up to T (3 s ago) into TSDB blocks with --label
// job=J --label instance=I, then Prometheus starts on those blocks and
// scrapes `serve --archive DIR` following the same archive as job J at
// address I. Here backfilled and scraped samples share one time line (the
// host's clock), with no shift: every series has samples on both sides of
// T, and each counter's samples, the backfilled then the scraped ones, never
// decrease (Prometheus counts no reset over the joined range). A follow
// scrape at time S serves the archive at S minus --archive.delay, so a
// backfill must end at least that delay before scraping starts (the README
// says so); T is 3 s before the first scrape, the delay 2 s.
func TestBackfillJoinsFollow(t *testing.T) {
	t.Parallel() // waits on peers, not the CPU: beside the other end-to-end runs
	bins := e2e.Require(t, "pmlogger", "pminfo", "prometheus")
	e2e.RequirePMCD(t) // pmlogger and the exporters read the system pmcd
	const job = "pcp-host"
	dir := t.TempDir()
	arch := filepath.Join(dir, "host")
	if err := os.Mkdir(arch, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "pmlogger.config")
	if err := os.WriteFile(cfg, []byte("log mandatory on 1 sec {\n    kernel.all.cpu.user\n    kernel.all.cpu.sys\n    kernel.percpu.cpu.idle\n    mem.util.used\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pl := exec.Command(bins[0], "-t", "1", "-c", cfg, "-l", filepath.Join(dir, "pmlogger.log"), filepath.Join(arch, time.Now().UTC().Format("20060102.15.04.05")))
	if err := pl.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pl.Process.Kill(); pl.Wait() })
	time.Sleep(7 * time.Second)

	addr := e2e.FreeAddr(t)
	data := t.TempDir()
	boundary := time.Now().Add(-3 * time.Second).Truncate(time.Millisecond)
	backfillCLI(t, "--output=tsdb:"+data, "--finish="+boundary.UTC().Format(time.RFC3339Nano),
		"--label=job="+job, "--label=instance="+addr, arch)
	begin := time.Now()
	startExporter(t, http.DefaultClient, "http://"+addr, "serve", "--web.listen-address="+addr, "--archive="+arch,
		"--replay.interp=prior") // the rule of the installed libpcp (6.0.3)
	prom := e2e.StartPrometheus(t, fmt.Sprintf(`global:
  scrape_interval: 1s
scrape_configs:
  - job_name: %q
    static_configs:
      - targets: [%q]
`, job, addr), data)
	scrapes := waitScrapes(t, prom, job, 4)
	end := time.Now()
	window := fmt.Sprintf("[%ds]", int(end.Sub(boundary).Seconds())+60)
	b := float64(boundary.UnixMilli()) / 1000
	series, counters := 0, 0
	for _, s := range e2e.PromQuery(t, prom, fmt.Sprintf(`{job=%q}%s`, job, window), end) {
		name := s.Metric["__name__"]
		if selfMetric(name) {
			continue
		}
		series++
		before, after := 0, 0
		last := math.Inf(-1)
		for _, p := range s.Values {
			at, _ := strconv.ParseFloat(fmt.Sprint(p[0]), 64)
			v, _ := strconv.ParseFloat(fmt.Sprint(p[1]), 64)
			switch {
			case at <= b:
				before++
			case at >= float64(begin.Unix()):
				after++
			default:
				t.Errorf("%v: a sample at %.3f, between the boundary %.3f and the first scrape", s.Metric, at, b)
			}
			if strings.HasSuffix(name, "_total") {
				if v < last {
					t.Errorf("%v: %v at %.3f after %v: a counter decreasing across the join", s.Metric, v, at, last)
				}
				last = v
			}
		}
		if before == 0 || after == 0 {
			t.Errorf("%v: %d backfilled and %d scraped samples: not one joined series", s.Metric, before, after)
		}
		if strings.HasSuffix(name, "_total") {
			counters++
			r := e2e.PromQuery(t, prom, fmt.Sprintf(`resets(%s{job=%q,instname=%q}%s)`, name, job, s.Metric["instname"], window), end)
			if len(r) != 1 || fmt.Sprint(r[0].Value[1]) != "0" {
				t.Errorf("resets(%v) = %v, want 0", s.Metric, r)
			}
		}
	}
	if counters < 3 || series < 5 {
		t.Errorf("%d series, %d counters", series, counters)
	}
	t.Logf("%d series (%d counters) joined; %d scrapes", series, counters, scrapes)
}

// waitScrapes waits up to 30 s for n scrapes of job by Prometheus and
// returns how many it made.
func waitScrapes(t *testing.T, prom, job string, n int) int {
	t.Helper()
	scrapes := 0
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && scrapes < n; {
		time.Sleep(time.Second)
		if r := e2e.PromQuery(t, prom, fmt.Sprintf(`count_over_time(up{job=%q}[1m])`, job), time.Time{}); len(r) == 1 {
			scrapes, _ = strconv.Atoi(fmt.Sprint(r[0].Value[1]))
		}
	}
	if scrapes < n {
		t.Fatalf("%d scrapes of %s in 30 s, want %d", scrapes, job, n)
	}
	return scrapes
}

// backfillCLI runs `pcp-exporter backfill --quiet args` to its end.
func backfillCLI(t *testing.T, args ...string) {
	t.Helper()
	if code, stderr := runCLI(t, nil, append([]string{"backfill", "--quiet"}, args...)...); code != 0 {
		t.Fatalf("backfill %s: exit %d\n%s", strings.Join(args, " "), code, stderr)
	}
}

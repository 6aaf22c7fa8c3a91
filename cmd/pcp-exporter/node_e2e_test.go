package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
	"github.com/pcp-exporter/pcp-exporter/internal/longtest"
)

var updateNodeMixinTests = flag.Bool("update-node-mixin-tests", false, "rewrite mixin/node/tests.yaml from the node profile test's scrape")

const nodeMixinDir = "../../mixin/node"

// The documented differences between node_exporter 1.5 and the node
// profile (README "node profile"): PCP has no filesystem type and no NIS
// domain name; the linux agent lists loopback traffic (node_exporter's
// netlink stats leave lo out) and no zram, device-mapper or partition
// devices in disk.dev (it names dm devices by their dm name).
var (
	nodeOnlyLabels  = map[string]bool{"fstype": true, "domainname": true}
	nodeOnlyDevices = regexp.MustCompile(`^(zram\d+|dm-\d+|loop\d+|ram\d+|sr\d+|nbd\d+)$`)
	pcpOnlyDevices  = regexp.MustCompile(`^lo$`)
)

// TestNodeProfileAgainstNodeExporter is the node profile's end-to-end
// test: node_exporter (Debian's 1.5) and `serve --naming node` on the local
// pmcd, on loopback ports, scraped every second by one real Prometheus for
// three minutes and a half, with node-mixin's rendered recording rules and
// alerts loaded for both jobs. Then:
//   - every family both serve has the same type (per-target metadata) and
//     the same label sets, up to the documented differences;
//   - the fixed values are equal (memory and swap totals, filesystem sizes
//     and inodes, fd maximum, boot time, CPU count, MTUs);
//   - every shared counter's rate over the last 3 minutes agrees within 1%
//     (or one tick of the counter where the rate is near zero);
//   - every node-mixin recording rule has the same series on both jobs and
//     values within 2%; every rule and alert evaluates without error.
//
// With -update-node-mixin-tests it writes mixin/node/tests.yaml from the
// scrape (promtool's unit test of the rules on the profile's series).
func TestNodeProfileAgainstNodeExporter(t *testing.T) {
	longtest.Skip(t, "5.5 minutes of scrapes of node_exporter and serve --naming node")
	if raceEnabled {
		t.Skip("a multi-minute end-to-end test: not under the race detector")
	}
	t.Parallel() // waits on peers, not the CPU: beside the other end-to-end runs
	bins := e2e.Require(t, "prometheus", "prometheus-node-exporter", "promtool")
	e2e.LockPMCD(t, false) // serve reads the system pmcd
	dir := t.TempDir()

	neAddr := e2e.FreeAddr(t)
	ne := exec.Command(bins[1], "--web.listen-address="+neAddr)
	neLog, _ := os.Create(filepath.Join(dir, "node_exporter.log"))
	ne.Stdout, ne.Stderr = neLog, neLog
	if err := ne.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ne.Process.Kill(); ne.Wait(); neLog.Close() })

	addr := e2e.FreeAddr(t)
	startExporter(t, http.DefaultClient, "http://"+addr, "serve", "--web.listen-address="+addr, "--pmcd=local:", "--naming=node",
		"--pmcd.metrics=kernel", "--pmcd.metrics=mem", "--pmcd.metrics=disk", "--pmcd.metrics=filesys", "--pmcd.metrics=network",
		"--pmcd.metrics=vfs", "--pmcd.metrics=hinv.pagesize", "--pmcd.metrics=netfilter")
	waitHTTP(t, "http://"+neAddr+"/metrics")
	// both targets from the first scrape: the same windows for rates
	waitBody(t, "http://"+addr+"/metrics", "node_cpu_seconds_total{")

	// node-mixin's rules for both jobs (the rendered files select job="node")
	for _, f := range []string{"rules.yaml", "alerts.yaml"} {
		b, err := os.ReadFile(filepath.Join(nodeMixinDir, f))
		if err != nil {
			t.Fatal(err)
		}
		b = []byte(strings.ReplaceAll(string(b), `job="node"`, `job=~"node|pcpnode"`))
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	prom := e2e.StartPrometheus(t, fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 5s
rule_files: [%q, %q]
scrape_configs:
  - job_name: node
    static_configs: [{targets: [%q], labels: {host: this}}]
  - job_name: pcpnode
    static_configs: [{targets: [%q], labels: {host: this}}]
`, filepath.Join(dir, "rules.yaml"), filepath.Join(dir, "alerts.yaml"), neAddr, addr), "")
	// the recording rules are rate5m: compared once both targets have five
	// full minutes of samples, at a time 17 s back, so that node_exporter's
	// rules are known 15 s on either side of it (below)
	time.Sleep(325 * time.Second)
	at := time.Now().Add(-17 * time.Second).Truncate(time.Second)

	// families and types
	neMeta, pcpMeta := targetMetadata(t, prom, "node"), targetMetadata(t, prom, "pcpnode")
	var shared []string
	for name, typ := range pcpMeta {
		if !strings.HasPrefix(name, "node_") {
			continue
		}
		nt, ok := neMeta[name]
		if !ok {
			continue
		}
		shared = append(shared, name)
		if nt != typ {
			t.Errorf("%s: type %s, node_exporter's %s", name, typ, nt)
		}
	}
	sort.Strings(shared)
	if len(shared) < 150 {
		t.Errorf("only %d families shared with node_exporter: %v", len(shared), shared)
	}
	t.Logf("%d families shared with node_exporter", len(shared))

	// label sets
	neSeries := seriesByFamily(e2e.PromQuery(t, prom, `{job="node",__name__=~"node_.+"}`, at))
	pcpSeries := seriesByFamily(e2e.PromQuery(t, prom, `{job="pcpnode",__name__=~"node_.+"}`, at))
	for _, name := range shared {
		ne, pc := neSeries[name], pcpSeries[name]
		for k := range ne {
			if _, ok := pc[k]; !ok && !nodeOnlyDevices.MatchString(labelOf(k, "device")) {
				t.Errorf("%s%s: node_exporter only", name, k)
			}
		}
		for k := range pc {
			if _, ok := ne[k]; !ok && !pcpOnlyDevices.MatchString(labelOf(k, "device")) {
				t.Errorf("%s%s: pcp-exporter only", name, k)
			}
		}
	}

	// fixed values
	for _, q := range []string{
		`node_memory_MemTotal_bytes`, `node_memory_SwapTotal_bytes`, `node_memory_HugePages_Total`, `node_memory_CommitLimit_bytes`,
		`node_memory_VmallocTotal_bytes`, `node_filesystem_size_bytes`, `node_filesystem_files`, `node_filefd_maximum`,
		`node_boot_time_seconds`, `count without (cpu, mode) (node_cpu_seconds_total{mode="idle"})`, `node_network_mtu_bytes`,
		`node_entropy_pool_size_bits`, `node_nf_conntrack_entries_limit`,
	} {
		ne := valuesByLabels(e2e.PromQuery(t, prom, withJob(q, "node"), at))
		pc := valuesByLabels(e2e.PromQuery(t, prom, withJob(q, "pcpnode"), at))
		if len(pc) == 0 && strings.Contains(q, "conntrack") {
			continue // the netfilter agent is not installed
		}
		if len(pc) == 0 {
			t.Errorf("%s: no value from pcp-exporter", q)
		}
		for k, v := range pc {
			if w, ok := ne[k]; ok && w != v {
				t.Errorf("%s%s = %v, node_exporter %v", q, k, v, w)
			}
		}
	}

	// counter rates over the same window: the increase of pcp-exporter's
	// series between its first and last sample of the last 3 minutes, and
	// node_exporter's interpolated at the same times, within 1%, or within
	// one tick, or within what node_exporter's counter did over the scrape
	// interval around each end (the two are scraped at different instants
	// of each second, and discards or I/O pressure come in bursts)
	rates := 0
	for _, name := range shared {
		if neMeta[name] != "counter" && !strings.HasPrefix(name, "node_vmstat_") && !isNetstatCounter(name) {
			continue
		}
		q := fmt.Sprintf(`%s[3m]`, name)
		ne := rangeByLabels(e2e.PromQuery(t, prom, withJob(q, "node"), at))
		pc := rangeByLabels(e2e.PromQuery(t, prom, withJob(q, "pcpnode"), at))
		for k, ps := range pc {
			ns, ok := ne[k]
			if !ok || len(ps) < 60 {
				continue
			}
			for len(ps) > 2 && ps[0].t < ns[0].t {
				ps = ps[1:]
			}
			for len(ps) > 2 && ps[len(ps)-1].t > ns[len(ns)-1].t {
				ps = ps[:len(ps)-1]
			}
			t0, t1 := ps[0].t, ps[len(ps)-1].t
			v, w := ps[len(ps)-1].v-ps[0].v, interpolate(ns, t1)-interpolate(ns, t0)
			rates++
			if !closeRate(v, w, counterTick(name)) && math.Abs(v-w) > around(ns, t0)+around(ns, t1) {
				t.Errorf("increase of %s%s over %.0f s = %v, node_exporter %v (%.2f%%)", name, k, t1-t0, v, w, 100*math.Abs(v-w)/math.Max(math.Abs(w), 1e-300))
			}
		}
	}
	t.Logf("%d counter series' increases compared", rates)

	// node-mixin's recording rules: within 2%, or within what node_exporter's
	// own series moved over the 15 s on either side (the two targets are
	// scraped up to a second apart: the gauges under them, memory and load,
	// change in between, and a burst of a counter, disk time or major
	// faults, at either end of a rate5m window is in one target's window
	// and not yet, or no longer, in the other's)
	for _, rec := range recordNames(t) {
		ne := valuesByLabels(e2e.PromQuery(t, prom, rec+`{job="node"}`, at))
		pc := valuesByLabels(e2e.PromQuery(t, prom, rec+`{job="pcpnode"}`, at))
		spread := valuesByLabels(e2e.PromQuery(t, prom, fmt.Sprintf(`max_over_time(%s{job="node"}[30s]) - min_over_time(%[1]s{job="node"}[30s])`, rec), at.Add(15*time.Second)))
		if len(pc) == 0 {
			t.Errorf("%s: no series for pcp-exporter", rec)
		}
		for k, w := range ne {
			v, ok := pc[k]
			if !ok {
				if !nodeOnlyDevices.MatchString(labelOf(k, "device")) {
					t.Errorf("%s%s: node_exporter only", rec, k)
				}
				continue
			}
			if !(math.Abs(v-w) <= 0.02*math.Max(math.Abs(v), math.Abs(w)) || math.Abs(v-w) < 1e-3 || math.Abs(v-w) <= spread[k]) {
				t.Errorf("%s%s = %v, node_exporter %v (its own spread over 15 s either side: %v)", rec, k, v, w, spread[k])
			}
		}
		for k := range pc {
			if _, ok := ne[k]; !ok {
				t.Errorf("%s%s: pcp-exporter only", rec, k)
			}
		}
	}

	// every rule and alert evaluates without error
	for _, r := range ruleHealth(t, prom) {
		if r.Health != "ok" || r.LastError != "" {
			t.Errorf("rule %s%s: health %s %s", r.Name, r.Type, r.Health, r.LastError)
		}
	}

	if *updateNodeMixinTests {
		writeNodeMixinTests(t, prom, at)
	}
}

// waitBody waits until u's body holds want.
func waitBody(t *testing.T, u, want string) {
	t.Helper()
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if resp, err := http.Get(u); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(b), want) {
				return
			}
		}
	}
	t.Fatalf("%s never served %s", u, want)
}

type sample struct{ t, v float64 }

// rangeByLabels returns the samples of a range query's series.
func rangeByLabels(ss []e2e.PromSeries) map[string][]sample {
	out := map[string][]sample{}
	for _, s := range ss {
		var xs []sample
		for _, p := range s.Values {
			tt, _ := p[0].(float64)
			str, _ := p[1].(string)
			v, _ := strconv.ParseFloat(str, 64)
			xs = append(xs, sample{tt, v})
		}
		out[seriesKey(s.Metric)] = xs
	}
	return out
}

// around is what a counter did between its samples before and after t.
func around(xs []sample, t float64) float64 {
	for i := 1; i < len(xs); i++ {
		if xs[i].t >= t {
			return xs[i].v - xs[i-1].v
		}
	}
	return 0
}

// interpolate is a counter's value at t between its samples.
func interpolate(xs []sample, t float64) float64 {
	for i := 1; i < len(xs); i++ {
		if xs[i].t >= t {
			a, b := xs[i-1], xs[i]
			return a.v + (b.v-a.v)*(t-a.t)/(b.t-a.t)
		}
	}
	return xs[len(xs)-1].v
}

// waitHTTP waits until url answers 200.
func waitHTTP(t *testing.T, u string) {
	t.Helper()
	if !e2e.Answers(u, 20*time.Second) {
		t.Fatalf("%s does not answer", u)
	}
}

// targetMetadata is the type of every family of a job's target.
func targetMetadata(t *testing.T, prom, job string) map[string]string {
	var md []struct{ Metric, Type string }
	e2e.PromAPI(t, prom+"/api/v1/targets/metadata?"+url.Values{"match_target": {`{job="` + job + `"}`}}.Encode(), &md)
	out := map[string]string{}
	for _, m := range md {
		// a counter is named without _total in OpenMetrics (serve's
		// format), with it in the text format (node_exporter's)
		if m.Type == "counter" && !strings.HasSuffix(m.Metric, "_total") {
			m.Metric += "_total"
		}
		out[m.Metric] = m.Type
	}
	return out
}

// seriesKey is a series' labels without __name__, job and instance, and
// without the labels only node_exporter has, as text.
func seriesKey(m map[string]string) string {
	var ks []string
	for k, v := range m {
		if k == "__name__" || k == "job" || k == "instance" || nodeOnlyLabels[k] {
			continue
		}
		ks = append(ks, k+"="+strconv.Quote(v))
	}
	sort.Strings(ks)
	return "{" + strings.Join(ks, ",") + "}"
}

// labelOf returns a label's value from a seriesKey.
func labelOf(key, name string) string {
	m := regexp.MustCompile(`\b` + name + `="([^"]*)"`).FindStringSubmatch(key)
	if m == nil {
		return ""
	}
	return m[1]
}

func seriesByFamily(ss []e2e.PromSeries) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	for _, s := range ss {
		n := s.Metric["__name__"]
		if out[n] == nil {
			out[n] = map[string]float64{}
		}
		out[n][seriesKey(s.Metric)] = promSampleValue(s)
	}
	return out
}

func valuesByLabels(ss []e2e.PromSeries) map[string]float64 {
	out := map[string]float64{}
	for _, s := range ss {
		out[seriesKey(s.Metric)] = promSampleValue(s)
	}
	return out
}

func promSampleValue(s e2e.PromSeries) float64 {
	str, _ := s.Value[1].(string)
	v, _ := strconv.ParseFloat(str, 64)
	return v
}

// withJob adds job="..." to every selector of a simple query.
func withJob(q, job string) string {
	sel := `job="` + job + `"`
	if i := strings.Index(q, "{"); i >= 0 {
		return q[:i+1] + sel + "," + q[i+1:]
	}
	if i := strings.Index(q, "["); i >= 0 {
		return q[:i] + "{" + sel + "}" + q[i:]
	}
	if i := strings.Index(q, ")"); i >= 0 {
		return q[:i] + "{" + sel + "}" + q[i:]
	}
	return q + "{" + sel + "}"
}

// isNetstatCounter: node_exporter types netstat fields untyped; these are
// counters in the kernel (not CurrEstab nor Forwarding).
func isNetstatCounter(name string) bool {
	return strings.HasPrefix(name, "node_netstat_") && !strings.HasSuffix(name, "CurrEstab") && !strings.HasSuffix(name, "Forwarding")
}

// counterTick is the smallest step of a counter: a USER_HZ tick for CPU
// times, a millisecond for disk times, a microsecond for pressure, else 1.
func counterTick(name string) float64 {
	switch {
	case strings.HasPrefix(name, "node_cpu_"):
		return 0.01
	case strings.HasPrefix(name, "node_disk_") && strings.Contains(name, "seconds"):
		return 0.001
	case strings.HasPrefix(name, "node_pressure_"):
		return 1e-6
	case strings.HasSuffix(name, "_bytes_total") && strings.HasPrefix(name, "node_disk_"):
		return 512
	}
	return 1
}

// closeRate: within 1%, or within one tick over the window.
func closeRate(v, w, tick float64) bool {
	d := math.Abs(v - w)
	return d <= 0.01*math.Max(math.Abs(v), math.Abs(w)) || d <= tick
}

// recordNames lists node-mixin's recording rules.
func recordNames(t *testing.T) []string {
	b, err := os.ReadFile(filepath.Join(nodeMixinDir, "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile(`"record": "([^"]+)"`).FindAllStringSubmatch(string(b), -1) {
		out = append(out, m[1])
	}
	if len(out) != 15 {
		t.Fatalf("%d recording rules in rules.yaml, want node-mixin's 15", len(out))
	}
	return out
}

type ruleState struct {
	Name, Type, Health, LastError string
}

// ruleHealth lists every loaded rule's last evaluation.
func ruleHealth(t *testing.T, prom string) []ruleState {
	var d struct {
		Groups []struct{ Rules []ruleState }
	}
	e2e.PromAPI(t, prom+"/api/v1/rules", &d)
	var out []ruleState
	for _, g := range d.Groups {
		out = append(out, g.Rules...)
	}
	if len(out) != 41 {
		t.Errorf("%d rules loaded, want node-mixin's 15 recording rules and 26 alerts", len(out))
	}
	return out
}

package mixin

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/examples/mmvapp/shop"
	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
	"github.com/pcp-exporter/pcp-exporter/internal/longtest"
)

// Ports of this package's end-to-end tests (the range given to packaging).
const (
	dashExporterAddr   = "127.0.0.1:19295"
	dashArchiveAddr    = "127.0.0.1:19297"
	healthExporterAddr = "127.0.0.1:19296"
	privatePMCDPort    = "19294"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// exporterBinary returns $PCP_EXPORTER_BINARY (CI's build) or builds the
// exporter once.
func exporterBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PCP_EXPORTER_BINARY"); p != "" {
		return p
	}
	binOnce.Do(func() {
		binPath = filepath.Join(os.TempDir(), fmt.Sprintf("pcp-exporter-mixin-%d", os.Getpid()))
		out, err := exec.Command("go", "build", "-o", binPath, "../cmd/pcp-exporter").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	t.Cleanup(func() {})
	return binPath
}

// startExporter runs pcp-exporter serve with args on addr until the test
// ends and returns its process once /metrics answers.
func startExporter(t *testing.T, addr string, args ...string) *exec.Cmd {
	t.Helper()
	logf, err := os.Create(filepath.Join(t.TempDir(), "exporter.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exporterBinary(t), append([]string{"serve", "--web.listen-address=" + addr}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("exporter log:\n%s", b)
		}
	})
	if e2e.Answers("http://"+addr+"/metrics", 60*time.Second) {
		return cmd
	}
	t.Fatalf("pcp-exporter %q does not answer", args)
	return nil
}

// startPmlogger records pmcd.numagents (a metric the tests' pmcd source
// does not serve, so no series comes twice) every second into dir/arch.
func startPmlogger(t *testing.T, pmlogger, dir string) *exec.Cmd {
	t.Helper()
	cfg := filepath.Join(dir, "pmlogger.config")
	if err := os.WriteFile(cfg, []byte("log mandatory on 1 sec {\n    pmcd.numagents\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	arch := filepath.Join(dir, "arch")
	if err := os.Mkdir(arch, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(pmlogger, "-t", "1", "-c", cfg, "-l", filepath.Join(dir, "pmlogger.log"), filepath.Join(arch, time.Now().UTC().Format("20060102.15.04.05")))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		cmd.Wait()
	})
	time.Sleep(3 * time.Second) // a few records: the archive is being written
	return cmd
}

// startApp writes an MMV application's file dir/name, updated every 200 ms
// until the test ends.
func startApp(t *testing.T, dir, name string) {
	t.Helper()
	app, err := shop.New(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				app.Tick()
			}
		}
	}()
	t.Cleanup(func() {
		close(done)
		<-stopped
		app.Close()
	})
}

func promConfig(ruleFile string, targets ...string) string {
	rules := ""
	if ruleFile != "" {
		rules = fmt.Sprintf("rule_files: [%q]\n", ruleFile)
	}
	return fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
%sscrape_configs:
  - job_name: pcp-exporter
    static_configs:
      - targets: ["%s"]
`, rules, strings.Join(targets, `", "`))
}

var labelValuesRE = regexp.MustCompile(`^label_values\((.*), *([a-zA-Z_]+)\)$`)

// variableValues evaluates a query variable (label_values(SELECTOR, LABEL)
// with an optional /regex/ capturing the value) against Prometheus.
func variableValues(t *testing.T, prom, query, regex string) []string {
	t.Helper()
	m := labelValuesRE.FindStringSubmatch(query)
	if m == nil {
		t.Fatalf("variable query %q is not label_values(SELECTOR, LABEL)", query)
	}
	var series []map[string]string
	v := url.Values{"match[]": {m[1]}, "start": {fmt.Sprint(time.Now().Add(-10 * time.Minute).Unix())}}
	e2e.PromAPI(t, prom+"/api/v1/series?"+v.Encode(), &series)
	var re *regexp.Regexp
	if regex != "" {
		re = regexp.MustCompile(strings.Trim(regex, "/"))
	}
	var out []string
	for _, s := range series {
		val, ok := s[m[2]]
		if !ok {
			continue
		}
		if re != nil {
			sm := re.FindStringSubmatch(val)
			if sm == nil {
				continue
			}
			if len(sm) > 1 {
				val = sm[1]
			}
		}
		if !slices.Contains(out, val) {
			out = append(out, val)
		}
	}
	return out
}

// TestDashboardQueries: a real Prometheus scrapes two exporters, one
// serving the local pmcd and an MMV application, one following a pmlogger
// archive (serve exports archives instead of MMV files); every variable
// query of every dashboard offers the expected values, and every panel
// query, with the variables substituted, returns data for one of them (the
// archive lag is the follower's alone); every recording rule has series.
func TestDashboardQueries(t *testing.T) {
	longtest.Skip(t, "two exporters scraped by Prometheus until every source is up")
	if raceEnabled {
		t.Skip("end-to-end processes only: runs without the race detector")
	}
	bins := e2e.Require(t, "prometheus", "pmlogger", "pminfo")
	e2e.LockPMCD(t, false)
	dir := t.TempDir()
	mmvDir := filepath.Join(dir, "mmv")
	if err := os.Mkdir(mmvDir, 0o755); err != nil {
		t.Fatal(err)
	}
	startApp(t, mmvDir, "pcpxdash")
	startPmlogger(t, bins[1], dir)
	startExporter(t, dashExporterAddr, "--pmcd=local:", "--mmv.dir="+mmvDir,
		"--pmcd.metrics=kernel.all", "--pmcd.metrics=hinv.ncpu", "--pmcd.metrics=mem", "--pmcd.metrics=swap",
		"--pmcd.metrics=disk.dev", "--pmcd.metrics=network.interface", "--pmcd.metrics=network.tcp", "--pmcd.metrics=filesys")
	startExporter(t, dashArchiveAddr, "--archive="+filepath.Join(dir, "arch"))
	rules, err := filepath.Abs("rendered/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	prom := e2e.StartPrometheus(t, promConfig(rules, dashExporterAddr, dashArchiveAddr), "")
	// every source up in Prometheus, then a few more scrapes for the rates
	deadline := time.Now().Add(90 * time.Second)
	for {
		up := e2e.PromQuery(t, prom, `min(pcp_exporter_source_up) == 1 and count(pcp_exporter_source_up) == 3`, time.Time{})
		if len(up) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the exporters' three sources are not all up: %v", e2e.PromQuery(t, prom, "pcp_exporter_source_up", time.Time{}))
		}
		time.Sleep(time.Second)
	}
	time.Sleep(5 * time.Second)

	queries := 0
	for name, d := range dashboards(t) {
		vars := map[string]string{"__rate_interval": "10s", "job": "pcp-exporter", "app": "pcpxdash"}
		var instances []string
		repeat := map[string][]string{}
		for _, v := range d["templating"].(map[string]any)["list"].([]any) {
			v := v.(map[string]any)
			vn := v["name"].(string)
			if v["type"] != "query" {
				continue
			}
			regex, _ := v["regex"].(string)
			vals := variableValues(t, prom, substitute(v["query"].(string), vars), regex)
			switch vn {
			case "instance":
				if !slices.Contains(vals, dashExporterAddr) {
					t.Fatalf("%s: variable instance offers %q, not %s", name, vals, dashExporterAddr)
				}
				instances = vals
				vars[vn] = dashExporterAddr
			case "counter":
				// every value: the panel repeats for each
				if len(vals) < 3 {
					t.Fatalf("%s: variable counter offers %q, want the application's 3 counters", name, vals)
				}
				repeat[vn] = vals
			default:
				if !slices.Contains(vals, vars[vn]) {
					t.Fatalf("%s: variable %s offers %q, not %q", name, vn, vals, vars[vn])
				}
			}
		}
		for _, p := range d["panels"].([]any) {
			p := p.(map[string]any)
			rv, _ := p["repeat"].(string)
			reps := repeat[rv]
			if rv == "" {
				reps = []string{""}
			} else if len(reps) == 0 {
				t.Fatalf("%s: panel %q repeats for %q, not a variable with values", name, p["title"], rv)
			}
			for _, r := range reps {
				if rv != "" {
					vars[rv] = r
				}
				for _, tg := range p["targets"].([]any) {
					queries++
					var tried []string
					for _, inst := range instances {
						vars["instance"] = inst
						expr := substitute(tg.(map[string]any)["expr"].(string), vars)
						tried = append(tried, expr)
						if len(e2e.PromQuery(t, prom, expr, time.Time{})) > 0 {
							tried = nil
							break
						}
					}
					if tried != nil {
						t.Errorf("%s: panel %q returns no data: %q", name, p["title"], tried)
					}
				}
			}
		}
	}
	t.Logf("%d panel queries of %d dashboards return data", queries, len(dashboards(t)))

	// every recording rule has series for the pmcd exporter (but the swap
	// ratio on a host without swap)
	var rg struct {
		Groups []struct {
			Rules []struct{ Name, Type string }
		}
	}
	e2e.PromAPI(t, prom+"/api/v1/rules", &rg)
	n := 0
	for _, g := range rg.Groups {
		for _, r := range g.Rules {
			if r.Type != "recording" {
				continue
			}
			n++
			q := fmt.Sprintf(`%s{instance=%q}`, r.Name, dashExporterAddr)
			if len(e2e.PromQuery(t, prom, q, time.Time{})) > 0 {
				continue
			}
			if r.Name == "instance:pcp_swap_free:ratio" && len(e2e.PromQuery(t, prom, `swap_length_bytes == 0`, time.Time{})) > 0 {
				continue
			}
			t.Errorf("recording rule %s has no series", r.Name)
		}
	}
	if n != 12 {
		t.Errorf("%d recording rules loaded, want 12", n)
	}
}

// substitute replaces Grafana's $name and ${name} by vars' values.
func substitute(s string, vars map[string]string) string {
	return regexp.MustCompile(`\$\{?(\w+)\}?`).ReplaceAllStringFunc(s, func(m string) string {
		n := strings.Trim(m, "${}")
		if v, ok := vars[n]; ok {
			return v
		}
		return m
	})
}

// Package examples holds the user-facing examples (see README.md): the
// mmvwrite.Writer application examples/mmvapp, its Kubernetes manifests, and the
// Prometheus, OpenTelemetry Collector, derived-metrics and mapping files. The
// tests here check each file with the tool that consumes it; the Kubernetes
// manifests are checked strictly by deploy/helm/test.
package examples

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pcp-exporter/pcp-exporter/derive"
	"github.com/pcp-exporter/pcp-exporter/examples/mmvapp/shop"
	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/probe"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/mmv"
)

// shopMetrics writes the example application's MMV file, as the running
// application would, and returns the metrics a reader sees in it.
func shopMetrics(t *testing.T) []source.Metric {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mmvapp")
	app, err := shop.New(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })
	app.Tick()
	f, err := mmv.OpenFile(path, mmv.Options{PIDCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f.Metrics()
}

// TestPrometheusConfig: promtool accepts the scrape configuration.
func TestPrometheusConfig(t *testing.T) {
	promtool := e2e.Require(t, "promtool")[0]
	out, err := exec.Command(promtool, "check", "config", "prometheus/prometheus.yml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
}

// TestOtelcolConfig: the OpenTelemetry Collector accepts its configuration.
func TestOtelcolConfig(t *testing.T) {
	otelcol := e2e.Require(t, "otelcol")[0]
	cmd := exec.Command(otelcol, "validate", "--config=otelcol/config.yaml")
	cmd.Dir = "."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("otelcol validate: %v\n%s", err, out)
	}
}

// TestDerivedConfig: the derived-metrics file loads without errors and its
// metrics bind to the example application's metrics with the descriptors
// real PCP gives them. The expected units and semantics were recorded from
// PCP 6.0.3 with the application writing into pmdammv's directory:
//
//	go run ./examples/mmvapp -mmv.dir /var/lib/pcp/tmp/mmv &
//	pminfo -c examples/derived/mmvapp.conf -d mmvapp
func TestDerivedConfig(t *testing.T) {
	defs, errs := derive.LoadConfig("derived/mmvapp.conf")
	if len(errs) != 0 {
		t.Fatalf("derived/mmvapp.conf: %v", errs)
	}
	all, errs := derive.Describe(shopMetrics(t), defs)
	if len(errs) != 0 {
		t.Fatalf("binding to the application's metrics: %v", errs)
	}
	type desc struct{ sem, units string }
	want := map[string]desc{
		"mmvapp.latency.mean":     {"instant", "sec / count"},
		"mmvapp.requests.all":     {"counter", "count"},
		"mmvapp.requests.rate":    {"instant", "count / sec"},
		"mmvapp.sent.per_request": {"instant", "Kbyte / count"},
	}
	for _, m := range all {
		if d, ok := want[m.Name]; ok {
			if got := m.Desc.Units.String(); got != d.units {
				t.Errorf("%s units %q, want %q (pminfo)", m.Name, got, d.units)
			}
			if got := m.Desc.Sem.String(); got != d.sem {
				t.Errorf("%s semantics %q, want %q (pminfo)", m.Name, got, d.sem)
			}
			delete(want, m.Name)
		}
	}
	for n := range want {
		t.Errorf("derived metric %s missing", n)
	}
}

// TestMappingConfig: the mapping file loads and renames the application's
// metrics, keeping unit conversion and suffixes, and drops the excluded one.
func TestMappingConfig(t *testing.T) {
	cfg, err := mapping.LoadConfig("mapping/mapping.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m, err := mapping.New(cfg, mapping.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fams, _ := m.MapAll(shopMetrics(t), nil)
	got := map[string]float64{}
	for _, f := range fams {
		got[f.Name] = f.Scale
	}
	want := map[string]float64{
		"shop_requests_total":             1,
		"shop_request_time_seconds_total": 0.001,
		"shop_sent_bytes_total":           1024,
		"shop_version_info":               1,
	}
	for n, scale := range want {
		s, ok := got[n]
		if !ok {
			t.Errorf("family %s missing; got %v", n, keys(got))
			continue
		}
		if s != scale {
			t.Errorf("%s scale %g, want %g", n, s, scale)
		}
	}
	for n := range got {
		if _, ok := want[n]; !ok {
			t.Errorf("unexpected family %s (in_flight is excluded)", n)
		}
	}
}

func keys(m map[string]float64) string {
	var s []string
	for k := range m {
		s = append(s, k)
	}
	return strings.Join(s, " ")
}

// TestBackfillWalkthrough runs examples/backfill/walkthrough.sh with this
// repository's binary: OpenMetrics text through promtool, TSDB blocks, and
// remote write into VictoriaMetrics.
func TestBackfillWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs VictoriaMetrics")
	}
	e2e.Require(t, "promtool", "victoria-metrics", "curl", "python3")
	bin := filepath.Join(t.TempDir(), "pcp-exporter")
	build := exec.Command("go", "build", "-o", bin, "./cmd/pcp-exporter")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if err := exec.Command(bin, "help", "backfill").Run(); err != nil {
		t.Skipf("pcp-exporter has no backfill command in this tree: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	cmd := exec.Command("bash", "examples/backfill/walkthrough.sh")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "PCP_EXPORTER="+bin, "WORK="+t.TempDir(), "VM_PORT="+port)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("walkthrough.sh: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "== done") {
		t.Errorf("walkthrough did not finish:\n%s", out)
	}
	t.Logf("%s", out)
}

// TestProbeExamples: promtool accepts the /probe scrape configuration, and
// the exporter loads the auths and modules file (its secret and CA files
// made here).
func TestProbeExamples(t *testing.T) {
	promtool := e2e.Require(t, "promtool")[0]
	if out, err := exec.Command(promtool, "check", "config", "prometheus/probe.yml").CombinedOutput(); err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
	b, err := os.ReadFile("pmcd/pmcd.yml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ca := e2e.NewCA(t, "example")
	ca1, _ := os.ReadFile(ca.File)
	os.WriteFile(filepath.Join(dir, "pmcd-ca.pem"), ca1, 0o644)
	os.WriteFile(filepath.Join(dir, "pmcd-password"), []byte("pw\n"), 0o600)
	conf := filepath.Join(dir, "pmcd.yml")
	os.WriteFile(conf, []byte(strings.ReplaceAll(string(b), "/etc/pcp-exporter/", dir+"/")), 0o644)
	c, err := probe.Load(conf)
	if err != nil {
		t.Fatal(err)
	}
	if sec, err := c.Security("fleet"); err != nil || sec.TLS == nil || sec.SASL == nil || !c.Allowed("10.1.2.3:44321") || c.Allowed("8.8.8.8") {
		t.Fatalf("auth fleet %+v, %v", sec, err)
	}
}

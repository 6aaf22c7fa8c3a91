package mixin

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
)

// TestRenderedUpToDate: rendered/ is what the jsonnet source renders.
func TestRenderedUpToDate(t *testing.T) {
	jsonnet := e2e.Require(t, "jsonnet", "make")
	out := t.TempDir()
	cmd := exec.Command(jsonnet[1], "-s", "JSONNET="+jsonnet[0], "OUT="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make: %v\n%s", err, b)
	}
	err := filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(out, p)
		got, _ := os.ReadFile(p)
		want, err := os.ReadFile(filepath.Join("rendered", rel))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("rendered/%s is not what the jsonnet renders (run make mixin): %v", rel, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPromtool: promtool accepts the rules and their unit tests pass.
func TestPromtool(t *testing.T) {
	promtool := e2e.Require(t, "promtool")[0]
	for _, args := range [][]string{
		{"check", "rules", "rendered/alerts.yaml", "rendered/rules.yaml"},
		{"test", "rules", "tests/health_tests.yaml", "tests/host_tests.yaml"},
	} {
		if out, err := exec.Command(promtool, args...).CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// scrapeSeries reads the label sets (without job and instance) of the
// series of exposition files.
func scrapeSeries(t *testing.T, files ...string) map[string]bool {
	t.Helper()
	set := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			l := sc.Text()
			if l == "" || strings.HasPrefix(l, "#") {
				continue
			}
			i := strings.LastIndexByte(l, ' ')
			m, err := promParser.ParseMetric(l[:i])
			if err != nil {
				t.Fatalf("%s: %q: %v", f, l, err)
			}
			set[m.String()] = true
		}
	}
	return set
}

// TestInputSeriesFromScrapes: every input series of the rule tests is a
// series of the real scrapes in testdata/ (name and labels, but the job and
// instance Prometheus adds; up is Prometheus's own).
func TestInputSeriesFromScrapes(t *testing.T) {
	real := scrapeSeries(t, "testdata/pmcd-host.om", "testdata/exporter-self.prom", "testdata/backfill-textfile.prom")
	for _, f := range []string{"tests/health_tests.yaml", "tests/host_tests.yaml"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Tests []struct {
				InputSeries []struct{ Series string } `yaml:"input_series"`
			}
		}
		if err := yaml.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, tc := range doc.Tests {
			for _, s := range tc.InputSeries {
				m, err := promParser.ParseMetric(s.Series)
				if err != nil {
					t.Fatalf("%s: %q: %v", f, s.Series, err)
				}
				if m.Get("__name__") == "up" {
					continue
				}
				b := labels.NewBuilder(m)
				b.Del("job", "instance")
				if key := b.Labels().String(); !real[key] {
					t.Errorf("%s: input series %s is not in the real scrapes of testdata/", f, key)
				}
				n++
			}
		}
		if n == 0 {
			t.Errorf("%s: no input series", f)
		}
	}
}

var promParser = parser.NewParser(parser.Options{})

// dashboards returns the rendered dashboards by file name.
func dashboards(t *testing.T) map[string]map[string]any {
	t.Helper()
	files, _ := filepath.Glob("rendered/dashboards/*.json")
	if len(files) != 3 {
		t.Fatalf("want 3 dashboards, have %q", files)
	}
	out := map[string]map[string]any{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d map[string]any
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[filepath.Base(f)] = d
	}
	return out
}

// TestDashboardSchema: the dashboards validate against the dashboard JSON
// schema of the Grafana version they name (testdata/, from
// grafana/grafana-foundation-sdk's v11.6.x branch), and each has the
// data-source, job and instance variables, every panel querying ${datasource}.
func TestDashboardSchema(t *testing.T) {
	c := jsonschema.NewCompiler()
	sch, err := c.Compile("testdata/grafana-11.6-dashboard.jsonschema.json")
	if err != nil {
		t.Fatal(err)
	}
	for name, d := range dashboards(t) {
		if !strings.Contains(d["description"].(string), "Grafana 11.6") || d["schemaVersion"].(float64) != 41 {
			t.Errorf("%s: does not name Grafana 11.6 (schemaVersion 41)", name)
		}
		if err := sch.Validate(d); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		vars := map[string]string{}
		for _, v := range d["templating"].(map[string]any)["list"].([]any) {
			v := v.(map[string]any)
			vars[v["name"].(string)] = v["type"].(string)
		}
		if vars["datasource"] != "datasource" || vars["job"] != "query" || vars["instance"] != "query" {
			t.Errorf("%s: variables %v, want datasource, job and instance", name, vars)
		}
		for _, p := range d["panels"].([]any) {
			p := p.(map[string]any)
			if ds := p["datasource"].(map[string]any); ds["uid"] != "${datasource}" {
				t.Errorf("%s: panel %q queries %v", name, p["title"], ds)
			}
			for _, tg := range p["targets"].([]any) {
				expr := tg.(map[string]any)["expr"].(string)
				if !strings.Contains(expr, `job="$job", instance="$instance"`) {
					t.Errorf("%s: panel %q: %s does not select job and instance", name, p["title"], expr)
				}
			}
		}
	}
}

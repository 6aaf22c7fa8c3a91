package selfmetric

import (
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

var update = flag.Bool("update", false, "rewrite the README's list of self-metrics")

const readme = "../../README.md"

// TestREADMEList fails when the README's list of self-metrics is not the
// table's (-update rewrites it).
func TestREADMEList(t *testing.T) {
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	want, ok := Splice(doc, Markdown(All))
	if !ok {
		t.Fatalf("README.md lacks the lines\n%s\n%s", BeginMarker, EndMarker)
	}
	if want == doc {
		return
	}
	if *update {
		if err := os.WriteFile(readme, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("README.md's list of self-metrics is stale: go test ./internal/selfmetric -update")
}

// TestTable checks each entry: a valid name, unique, a counter named
// _total and nothing else, help, and Desc, NewGauge and NewCounter
// accepted by a registry.
func TestTable(t *testing.T) {
	seen := map[string]bool{}
	reg := prometheus.NewPedanticRegistry()
	for _, m := range All {
		if !strings.HasPrefix(m.Name, "pcp_exporter_") || seen[m.Name] {
			t.Errorf("%s: want a unique name starting pcp_exporter_", m.Name)
		}
		seen[m.Name] = true
		if (m.Type == Counter) != strings.HasSuffix(m.Name, "_total") {
			t.Errorf("%s: a %s; counters, and only they, end in _total", m.Name, m.Type)
		}
		if m.Help == "" || !strings.HasSuffix(m.Help, ".") {
			t.Errorf("%s: help %q: want a sentence", m.Name, m.Help)
		}
		if len(m.Labels) > 0 {
			if err := testutil.CollectAndCompare(constCollector{m}, strings.NewReader("")); err != nil {
				t.Errorf("%s: %v", m.Name, err)
			}
			continue
		}
		var err error
		if m.Type == Gauge {
			err = reg.Register(m.NewGauge())
		} else {
			err = reg.Register(m.NewCounter())
		}
		if err != nil {
			t.Errorf("%s: %v", m.Name, err)
		}
	}
	if _, err := reg.Gather(); err != nil {
		t.Error(err)
	}
}

// constCollector describes a labelled metric and sends none of it.
type constCollector struct{ m *Metric }

func (c constCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.m.Desc() }
func (c constCollector) Collect(chan<- prometheus.Metric)    {}

// TestDeclaredHereOnly fails on a self-metric name written as a string of
// its own in the module's non-test code outside this package: every
// self-metric is declared in this table.
func TestDeclaredHereOnly(t *testing.T) {
	lit := regexp.MustCompile(`"pcp_exporter_[a-z0-9_]+"`)
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir("../..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			abs, _ := filepath.Abs(p)
			if abs == here || d.Name() == "testdata" || (strings.HasPrefix(d.Name(), ".") && d.Name() != "." && d.Name() != "..") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range lit.FindAllString(string(b), -1) {
			t.Errorf("%s: %s declared outside internal/selfmetric: add it to the table", p, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

package e2e

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"gopkg.in/yaml.v3"
)

// HostMetric is one metric of the OpenTelemetry Collector hostmetrics
// receiver as its metadata.yaml declares it (the spec the hostmetrics
// naming is checked against; testdata/otel-hostmetrics).
type HostMetric struct {
	Name, Scraper string
	Enabled       bool
	Description   string
	Unit          string
	Kind          string // "sum" or "gauge"
	Monotonic     bool
	Temporality   string // "cumulative" for a sum
	ValueType     string // "int" or "double"
	// Attributes are the data-point attributes by their key (an
	// attribute's name_override, else its id), with their enum (nil: any
	// value).
	Attributes map[string][]string
}

// HostMetrics reads every <scraper>/metadata.yaml under dir.
func HostMetrics(t testing.TB, dir string) map[string]HostMetric {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*", "metadata.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no metadata.yaml under %s: %v", dir, err)
	}
	type number struct {
		ValueType   string `yaml:"value_type"`
		Monotonic   bool   `yaml:"monotonic"`
		Temporality string `yaml:"aggregation_temporality"`
	}
	type doc struct {
		Attributes map[string]struct {
			NameOverride string   `yaml:"name_override"`
			Enum         []string `yaml:"enum"`
		} `yaml:"attributes"`
		Metrics map[string]struct {
			Enabled     bool     `yaml:"enabled"`
			Description string   `yaml:"description"`
			Unit        string   `yaml:"unit"`
			Sum         *number  `yaml:"sum"`
			Gauge       *number  `yaml:"gauge"`
			Attributes  []string `yaml:"attributes"`
		} `yaml:"metrics"`
	}
	out := map[string]HostMetric{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d doc
		if err := yaml.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for name, m := range d.Metrics {
			hm := HostMetric{Name: name, Scraper: filepath.Base(filepath.Dir(f)), Enabled: m.Enabled, Description: m.Description, Unit: m.Unit, Attributes: map[string][]string{}}
			switch {
			case m.Sum != nil:
				hm.Kind, hm.Monotonic, hm.Temporality, hm.ValueType = "sum", m.Sum.Monotonic, m.Sum.Temporality, m.Sum.ValueType
			case m.Gauge != nil:
				hm.Kind, hm.ValueType = "gauge", m.Gauge.ValueType
			}
			for _, id := range m.Attributes {
				a, ok := d.Attributes[id]
				if !ok {
					t.Fatalf("%s: %s: attribute %s not declared", f, name, id)
				}
				key := id
				if a.NameOverride != "" {
					key = a.NameOverride
				}
				hm.Attributes[key] = a.Enum
			}
			out[name] = hm
		}
	}
	return out
}

// Keys returns the attribute keys of m, sorted.
func (m HostMetric) Keys() []string {
	out := make([]string, 0, len(m.Attributes))
	for k := range m.Attributes {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

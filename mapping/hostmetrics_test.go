package mapping

import (
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
)

// hostmetricsSpec is the pinned receiver's metadata.yaml files.
const hostmetricsSpec = "../testdata/otel-hostmetrics"

// HostmetricsLeftOut are the receiver's metrics (enabled by default) and
// attributes the profile does not give, each listed in
// docs/hostmetrics-profile.md.
var hostmetricsLeftOut = []string{
	"system.filesystem.usage mode", "system.filesystem.usage type",
	"system.filesystem.inodes.usage mode", "system.filesystem.inodes.usage type",
}

// TestHostmetricsTableMatchesMetadata: every row of the hostmetrics table
// is a metric of the pinned receiver's metadata.yaml with its description, unit, kind,
// monotonicity, temporality and value type; its attributes are the
// metric's (less the documented ones PCP has no source for) and its
// constant attribute values are in their enums. Every metric the receiver
// enables by default is in the table or named in the profile's document.
func TestHostmetricsTableMatchesMetadata(t *testing.T) {
	spec := e2e.HostMetrics(t, hostmetricsSpec)
	doc, err := os.ReadFile("../docs/hostmetrics-profile.md")
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, f := range hostFamilies {
		have[f.name] = true
		s, ok := spec[f.name]
		if !ok {
			t.Errorf("%s: not a metric of the receiver", f.name)
			continue
		}
		o := f.otel
		kind := "gauge"
		if o.sum {
			kind = "sum"
		}
		vt := "double"
		if o.integer {
			vt = "int"
		}
		if o.unit != s.Unit || kind != s.Kind || o.monotonic != s.Monotonic || vt != s.ValueType || (kind == "sum" && s.Temporality != "cumulative") {
			t.Errorf("%s: unit %q %s monotonic %v %s, metadata.yaml: %q %s monotonic %v %s %s", f.name, o.unit, kind, o.monotonic, vt, s.Unit, s.Kind, s.Monotonic, s.ValueType, s.Temporality)
		}
		if f.help != s.Description {
			t.Errorf("%s: description %q, metadata.yaml %q", f.name, f.help, s.Description)
		}
		if (f.typ == Counter) != (kind == "sum" && s.Monotonic) {
			t.Errorf("%s: Prometheus type %v for a %s (monotonic %v)", f.name, f.typ, kind, s.Monotonic)
		}
		want := map[string]bool{}
		for _, k := range s.Keys() {
			if !slices.Contains(hostmetricsLeftOut, f.name+" "+k) {
				want[k] = true
			}
		}
		for pi, p := range f.parts {
			got := map[string]bool{}
			if p.label != "" {
				got[p.label] = true
			}
			for _, j := range p.joins {
				got[j.label] = true
			}
			for _, c := range p.consts {
				got[c.Name] = true
				if enum := s.Attributes[c.Name]; enum != nil && !slices.Contains(enum, c.Value) {
					t.Errorf("%s part %d: %s=%q not in the enum %v", f.name, pi, c.Name, c.Value, enum)
				}
			}
			if !equalKeys(got, want) {
				t.Errorf("%s part %d (%s): attributes %v, metadata.yaml %v", f.name, pi, p.pcp, sortedKeys(got), sortedKeys(want))
			}
		}
	}
	for _, l := range hostmetricsLeftOut {
		if !strings.Contains(string(doc), "`"+strings.Fields(l)[1]+"`") {
			t.Errorf("left out %q: not in docs/hostmetrics-profile.md", l)
		}
	}
	for name, s := range spec {
		if s.Enabled && !have[name] && !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("%s (enabled by default in %s): neither in the table nor in docs/hostmetrics-profile.md", name, s.Scraper)
		}
	}
}

// TestHostmetricsPrometheusNames: the families' Prometheus names are the
// ones the collector's Prometheus exporter gives the same metrics
// (otlptranslator with suffixes: unit word, _total for monotonic sums, no
// word for an annotation unit such as {thread}).
func TestHostmetricsPrometheusNames(t *testing.T) {
	want := map[string]string{
		"system.cpu.time":                "system_cpu_time_seconds_total",
		"system.cpu.load_average.1m":     "system_cpu_load_average_1m",
		"system.memory.usage":            "system_memory_usage_bytes",
		"system.disk.io":                 "system_disk_io_bytes_total",
		"system.disk.operations":         "system_disk_operations_total",
		"system.disk.pending_operations": "system_disk_pending_operations",
		"system.network.connections":     "system_network_connections",
		"system.filesystem.inodes.usage": "system_filesystem_inodes_usage",
		"system.uptime":                  "system_uptime_seconds",
		"system.processes.created":       "system_processes_created_total",
	}
	for _, f := range hostFamilies {
		if w, ok := want[f.name]; ok && f.otel.promName != w {
			t.Errorf("%s: %s, want %s", f.name, f.otel.promName, w)
		}
		delete(want, f.name)
	}
	if len(want) > 0 {
		t.Errorf("not in the table: %v", want)
	}
}

func equalKeys(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

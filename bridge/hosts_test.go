package bridge

import (
	"bytes"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source/mmv"
	"github.com/pcp-exporter/pcp-exporter/source/mmv/mmvwrite"
)

// TestSeveralHostsShareFamilies: sources of different hosts (several
// pmcds; here MMV directories given another hostname each) serve the same
// metrics under the same names, told apart by hostname, each family once
// with every host's series in one group (text and OpenMetrics), the first
// host's help kept; both paths (fast and client_golang) agree. A source
// of a host already served (the same hostname again) still clashes. Before
// the fix the second host's metrics were skipped as name clashes.
func TestSeveralHostsShareFamilies(t *testing.T) {
	open := func(host, help string) Source {
		dir := t.TempDir()
		w, err := mmvwrite.New(filepath.Join(dir, "app"), mmvwrite.Config{
			Metrics: []mmvwrite.MetricDef{
				{Name: "requests", Item: 1, Type: mmvwrite.TypeU64, Sem: semantics.SemCounter, Units: semantics.Units{DimCount: 1}, InDom: 1, OneLine: help},
				{Name: "queue", Item: 2, Type: mmvwrite.TypeU64, Sem: semantics.SemInstant, OneLine: "queue length"},
			},
			InDoms: []mmvwrite.InDomDef{{Serial: 1, Instances: []mmvwrite.InstanceDef{{ID: 1, Name: "get"}, {ID: 2, Name: "put"}}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		w.MustHandle("requests", "get").SetUint64(1)
		w.MustHandle("requests", "put").SetUint64(2)
		w.MustHandle("queue", "").SetUint64(3)
		t.Cleanup(func() { w.Close() })
		d, err := mmv.OpenDir(dir, mmv.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return Source{Name: host, Src: d, Context: []mapping.LabelPair{{Name: "hostname", Value: host}}}
	}
	db1, db2, again := open("db1", "requests served"), open("db2", "requests served (another PCP version)"), open("db1", "requests served")
	c := New(mapper(t, mapping.NamingDefault), nil, db1, db2, again)

	var text, om bytes.Buffer
	if err := c.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteOpenMetrics(&om, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# HELP mmv_app_requests_total requests served\n# TYPE mmv_app_requests_total counter\n" +
			`mmv_app_requests_total{hostname="db1",instname="get"} 1` + "\n" +
			`mmv_app_requests_total{hostname="db1",instname="put"} 2` + "\n" +
			`mmv_app_requests_total{hostname="db2",instname="get"} 1` + "\n" +
			`mmv_app_requests_total{hostname="db2",instname="put"} 2` + "\n",
		"# HELP mmv_app_queue queue length\n# TYPE mmv_app_queue gauge\n" +
			`mmv_app_queue{hostname="db1"} 3` + "\n" + `mmv_app_queue{hostname="db2"} 3` + "\n",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text exposition lacks\n%s\ngot:\n%s", want, text.String())
		}
	}
	for name, b := range map[string][]byte{"text": text.Bytes(), "OpenMetrics": om.Bytes()} {
		if err := oneGroupPerFamily(b); err != nil {
			t.Errorf("%s: %v\n%s", name, err, b)
		}
	}
	if n := strings.Count(text.String(), `mmv_app_queue{hostname="db1"}`); n != 1 {
		t.Errorf("db1's queue %d times, want 1 (a second source of db1 clashes)", n)
	}
	// client_golang's path (a pedantic registry: one help per family)
	// gives the same lines
	slow := exposition(t, New(mapper(t, mapping.NamingDefault), nil, open("db1", "requests served"), open("db2", "requests served (another PCP version)")))
	for _, l := range strings.Split(strings.TrimSpace(text.String()), "\n") {
		if !strings.HasPrefix(l, "pcp_exporter_") && !bytes.Contains(slow, []byte(l+"\n")) {
			t.Errorf("client_golang's exposition lacks %q:\n%s", l, slow)
		}
	}
	promtoolCheck(t, text.Bytes())
}

// oneGroupPerFamily checks that every family has one header and its
// samples follow it together (no family given twice, no sample of one
// family among another's).
func oneGroupPerFamily(b []byte) error {
	typ := regexp.MustCompile(`^# TYPE (\S+) `)
	seen := map[string]bool{}
	family := ""
	for _, l := range strings.Split(string(b), "\n") {
		if m := typ.FindStringSubmatch(l); m != nil {
			if seen[m[1]] {
				return fmt.Errorf("family %s given twice", m[1])
			}
			seen[m[1]], family = true, m[1]
			continue
		}
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		name, _, _ := strings.Cut(l, "{")
		name, _, _ = strings.Cut(name, " ")
		if !strings.HasPrefix(name, family) {
			return fmt.Errorf("sample %q inside family %s", l, family)
		}
	}
	return nil
}

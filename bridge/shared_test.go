package bridge

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/mmv"
)

// TestOneSourceCollectorsShareTheMapping: collectors of one source each
// (/probe targets) over the same metrics share one mapping, and write what
// they wrote each with its own; another mapper maps anew.
func TestOneSourceCollectorsShareTheMapping(t *testing.T) {
	f, err := mmv.OpenFile(filepath.Join(corpus, "mmv", "files", "corpusv2"), mmv.Options{PIDCheck: false})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// as pmcd sources of one kind hold one metric set (source/pmcd's
	// shared.go)
	src := fixedMetrics{f, f.Metrics()}
	m := mapper(t, mapping.NamingDefault)
	c1 := New(m, nil, Source{Name: "a", Src: src})
	c2 := New(m, nil, Source{Name: "a", Src: src})
	c3 := New(mapper(t, mapping.NamingPmproxy), nil, Source{Name: "a", Src: src})
	var w1, w2, w3 bytes.Buffer
	for _, w := range []struct {
		c *Collector
		b *bytes.Buffer
	}{{c1, &w1}, {c2, &w2}, {c3, &w3}} {
		if err := w.c.WriteText(w.b); err != nil {
			t.Fatal(err)
		}
	}
	s1, s2, s3 := c1.sources[0], c2.sources[0], c3.sources[0]
	if len(s1.families) == 0 || unsafe.SliceData(s1.families) != unsafe.SliceData(s2.families) || unsafe.SliceData(s1.pmids) != unsafe.SliceData(s2.pmids) {
		t.Errorf("two collectors of the same metrics and mapper: families not shared (%d families)", len(s1.families))
	}
	if unsafe.SliceData(s1.families) == unsafe.SliceData(s3.families) {
		t.Error("another mapper's collector shares the first one's families")
	}
	if w1.Len() == 0 || !bytes.Equal(w1.Bytes(), w2.Bytes()) {
		t.Errorf("shared mapping: expositions differ:\n%s\n---\n%s", w1.Bytes(), w2.Bytes())
	}
	// the unshared path (two sources in one collector, named apart) maps
	// the same families for the first source
	both := New(m, nil, Source{Name: "a", Src: src}, Source{Name: "b", Src: src})
	var wb bytes.Buffer
	if err := both.WriteText(&wb); err != nil {
		t.Fatal(err)
	}
	if both.sources[0].mapped != nil {
		t.Error("a collector of two sources uses a shared mapping")
	}
	if len(both.sources[0].families) != len(s1.families) {
		t.Errorf("families: %d alone, %d beside another source", len(s1.families), len(both.sources[0].families))
	}
}

// fixedMetrics is a source whose Metrics are one slice.
type fixedMetrics struct {
	source.Source
	ms []source.Metric
}

func (f fixedMetrics) Metrics() []source.Metric { return f.ms }

// contextApart is fixedMetrics whose context labels are kept apart
// (source.ContextApart), as a /probe target's pmcd source keeps them.
type contextApart struct {
	fixedMetrics
	ctx semantics.LabelSet
}

func (c contextApart) ContextLabels() (semantics.LabelSet, bool) { return c.ctx, true }

// TestContextApartGoesToTargetInfo: sources whose context labels are kept
// apart share the mapping and still each have their own target_info, as
// when the labels were the metrics' (the default naming: lean labels).
func TestContextApartGoesToTargetInfo(t *testing.T) {
	f, err := mmv.OpenFile(filepath.Join(corpus, "mmv", "files", "corpusv2"), mmv.Options{PIDCheck: false})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := mapper(t, mapping.NamingDefault)
	ms := f.Metrics()
	ctx := func(host string) semantics.LabelSet {
		return semantics.LabelSet{{Name: "hostname", Value: `"` + host + `"`, Flags: semantics.LabelContext}, {Name: "machineid", Value: `"` + host + `-id"`, Flags: semantics.LabelContext}}
	}
	// the same metrics with the context merged into each one's labels
	merged := func(host string) []source.Metric {
		out := make([]source.Metric, len(ms))
		for i, x := range ms {
			x.Labels = semantics.MergeLabels(ctx(host), x.Labels)
			out[i] = x
		}
		return out
	}
	write := func(c *Collector) string {
		var b bytes.Buffer
		if err := c.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	shared := fixedMetrics{f, ms}
	a1 := New(m, nil, Source{Name: "a", Src: contextApart{shared, ctx("h1")}})
	a2 := New(m, nil, Source{Name: "a", Src: contextApart{shared, ctx("h2")}})
	w1, w2 := write(a1), write(a2)
	for _, host := range []string{"h1", "h2"} {
		want := write(New(m, nil, Source{Name: "a", Src: fixedMetrics{f, merged(host)}}))
		got := w1
		if host == "h2" {
			got = w2
		}
		if got != want || !strings.Contains(got, `hostname="`+host+`",machineid="`+host+`-id"} 1`) {
			t.Errorf("%s: context apart:\n%s\nmerged:\n%s", host, got, want)
		}
	}
	if unsafe.SliceData(a1.sources[0].families) != unsafe.SliceData(a2.sources[0].families) {
		t.Error("sources differing only in their context labels kept apart: mapping not shared")
	}
}

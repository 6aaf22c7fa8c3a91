package bridge

import (
	"bytes"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/pcp-exporter/pcp-exporter/mapping"
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

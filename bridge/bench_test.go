package bridge

import (
	"fmt"
	"io"
	"path/filepath"
	"testing"

	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source/mmv"
	"github.com/pcp-exporter/pcp-exporter/source/mmv/mmvwrite"
)

// BenchmarkWriteText scrapes an MMV file of 1,000 metrics x 100 instances
// (workload W1's shape) through the text fast path.
func BenchmarkWriteText(b *testing.B) {
	var insts []mmvwrite.InstanceDef
	for i := 0; i < 100; i++ {
		insts = append(insts, mmvwrite.InstanceDef{ID: int32(i), Name: fmt.Sprintf("inst%03d", i)})
	}
	cfg := mmvwrite.Config{InDoms: []mmvwrite.InDomDef{{Serial: 1, Instances: insts}}}
	for m := 0; m < 1000; m++ {
		d := mmvwrite.MetricDef{Name: fmt.Sprintf("metric%04d", m), Item: uint32(m + 1), InDom: 1, Units: semantics.Units{DimCount: 1}}
		switch m % 4 {
		case 0:
			d.Type, d.Sem = mmvwrite.TypeU64, semantics.SemCounter
		case 1:
			d.Type, d.Sem = mmvwrite.TypeDouble, semantics.SemInstant
		case 2:
			d.Type, d.Sem = mmvwrite.TypeDouble, semantics.SemCounter
		default:
			d.Type, d.Sem = mmvwrite.TypeU64, semantics.SemInstant
		}
		cfg.Metrics = append(cfg.Metrics, d)
	}
	dir := b.TempDir()
	w, err := mmvwrite.New(filepath.Join(dir, "w1"), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	d, err := mmv.OpenDir(dir, mmv.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	naming := mapping.NamingDefault
	m, _ := mapping.New(nil, mapping.Options{Naming: &naming})
	c := New(m, nil, Source{Name: "w1", Src: d})
	c.WriteText(io.Discard)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := c.WriteText(io.Discard); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100000, "ns/value")
}

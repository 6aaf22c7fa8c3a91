package mmv

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/mmv/mmvwrite"
)

// BigConfig is the W1 "anchbig" workload of the peer benchmarks: metrics
// metrics over one indom of instances instances, types cycling through u64
// counter, double gauge, u32 and i64 (no strings, as w1-mmvwriter.c).
func BigConfig(metrics, instances int) mmvwrite.Config {
	cfg := mmvwrite.Config{Cluster: 321}
	in := mmvwrite.InDomDef{Serial: 1}
	for i := 0; i < instances; i++ {
		in.Instances = append(in.Instances, mmvwrite.InstanceDef{ID: int32(i), Name: fmt.Sprintf("i%03d", i)})
	}
	cfg.InDoms = []mmvwrite.InDomDef{in}
	types := []MetricType{TypeU64, TypeDouble, TypeU32, TypeI64}
	for i := 0; i < metrics; i++ {
		t := types[i%len(types)]
		sem := semInstant
		if t == TypeU64 {
			sem = semCounter
		}
		cfg.Metrics = append(cfg.Metrics, mmvwrite.MetricDef{Name: fmt.Sprintf("m%04d", i), Item: uint32(i), Type: t, Sem: sem, InDom: 1})
	}
	return cfg
}

func benchFetch(b *testing.B, metrics, instances int, dir bool) {
	path := filepath.Join(b.TempDir(), "anchbig")
	cfg := BigConfig(metrics, instances)
	w, err := mmvwrite.New(path, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	fillValues(b, w, cfg, 1)
	var src source.Source
	if dir {
		src, err = OpenDir(filepath.Dir(path), Options{PIDCheck: true})
	} else {
		src, err = OpenFile(path, Options{PIDCheck: true})
	}
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	var pmids []semantics.PMID
	for _, m := range src.Metrics() {
		pmids = append(pmids, m.Desc.PMID)
	}
	var res source.Result
	if err := src.Fetch(time.Time{}, pmids, &res); err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, s := range res.Sets {
		n += len(s.Values)
	}
	if n != metrics*instances {
		b.Fatalf("%d values, want %d", n, metrics*instances)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := src.Fetch(time.Time{}, pmids, &res); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/value")
}

// BenchmarkFetch reads 1,000 metrics x 100 instances (100k values).
func BenchmarkFetch(b *testing.B) {
	b.Run("File/1000x100", func(b *testing.B) { benchFetch(b, 1000, 100, false) })
	b.Run("Dir/1000x100", func(b *testing.B) { benchFetch(b, 1000, 100, true) })
	b.Run("File/100x10", func(b *testing.B) { benchFetch(b, 100, 10, false) })
}

// BenchmarkOpen measures loading (mapping and decoding) the 100k-value file.
func BenchmarkOpen(b *testing.B) {
	path := filepath.Join(b.TempDir(), "anchbig")
	w, err := mmvwrite.New(path, BigConfig(1000, 100))
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		f, err := OpenFile(path, Options{})
		if err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

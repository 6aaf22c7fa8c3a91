package bridge

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"

	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source/mmv"
	"github.com/pcp-exporter/pcp-exporter/source/mmv/mmvwrite"
)

// BenchmarkWriteText scrapes an MMV file of 1,000 metrics x 100 instances
// (workload W1's shape) through the text fast path.
func BenchmarkWriteText(b *testing.B) { benchWrite(b, (*Collector).WriteText) }

// BenchmarkWriteOpenMetrics is BenchmarkWriteText in OpenMetrics (with a
// _created sample per counter series: half of them).
func BenchmarkWriteOpenMetrics(b *testing.B) {
	benchWrite(b, func(c *Collector, w io.Writer) error { return c.WriteOpenMetrics(w, true) })
}

// BenchmarkClientGolangOpenMetrics renders what BenchmarkWriteOpenMetrics
// renders through client_golang (Gather, expfmt's OpenMetrics encoder with
// _created lines): the path the fast path replaces.
func BenchmarkClientGolangOpenMetrics(b *testing.B) {
	benchWrite(b, func(c *Collector, w io.Writer) error {
		reg := prometheus.NewRegistry()
		if err := reg.Register(SamplesOnly(c)); err != nil {
			return err
		}
		mfs, err := reg.Gather()
		if err != nil {
			return err
		}
		for _, mf := range mfs {
			if _, err := expfmt.MetricFamilyToOpenMetrics(w, mf, expfmt.WithCreatedLines()); err != nil {
				return err
			}
		}
		return nil
	})
}

// BenchmarkHandlerPrometheus serves /metrics to Prometheus's request
// (its Accept header, gzip): the fast path, the self-metrics, compression.
func BenchmarkHandlerPrometheus(b *testing.B) {
	var h http.Handler
	benchWrite(b, func(c *Collector, w io.Writer) error {
		if h == nil {
			reg := prometheus.NewRegistry()
			reg.MustRegister(c.Self())
			h = c.Handler(reg, reg, promhttp.HandlerOpts{EnableOpenMetrics: true})
		}
		req := httptest.NewRequest("GET", "/metrics", nil)
		req.Header.Set("Accept", prometheusAccept)
		req.Header.Set("Accept-Encoding", "gzip")
		rw := discardResponse{h: http.Header{}}
		h.ServeHTTP(rw, req)
		return nil
	})
}

type discardResponse struct{ h http.Header }

func (d discardResponse) Header() http.Header         { return d.h }
func (d discardResponse) Write(b []byte) (int, error) { return len(b), nil }
func (d discardResponse) WriteHeader(int)             {}

func benchWrite(b *testing.B, write func(*Collector, io.Writer) error) {
	c := w1Collector(b, 100)
	write(c, io.Discard)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := write(c, io.Discard); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100000, "ns/value")
}

// w1Collector serves an MMV file of workload W1's shape: 1,000 metrics
// (counters and gauges, integer and double) x ninst instances.
func w1Collector(tb testing.TB, ninst int) *Collector {
	var insts []mmvwrite.InstanceDef
	for i := 0; i < ninst; i++ {
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
	dir := tb.TempDir()
	w, err := mmvwrite.New(filepath.Join(dir, "w1"), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { w.Close() })
	d, err := mmv.OpenDir(dir, mmv.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.Close() })
	naming := mapping.NamingDefault
	m, _ := mapping.New(nil, mapping.Options{With: mapping.LeanNames(), Naming: &naming})
	return New(m, nil, Source{Name: "w1", Src: d})
}

// TestFastPathAllocsPerSeries: in steady state the fast path allocates
// about the same with 10 and with 100 series per metric (10,000 and 100,000
// series): nothing per series, in either format.
func TestFastPathAllocsPerSeries(t *testing.T) {
	for _, f := range []Format{{}, {OpenMetrics: true}, {OpenMetrics: true, Created: true}} {
		var allocs [2]float64
		for i, n := range []int{10, 100} {
			c := w1Collector(t, n)
			c.Write(io.Discard, f)
			allocs[i] = testing.AllocsPerRun(5, func() { c.Write(io.Discard, f) })
		}
		// a few more for larger per-scrape maps and slices, not per series
		if allocs[1]-allocs[0] > 0.001*(100000-10000) {
			t.Errorf("%+v: %.0f allocations for 10,000 series, %.0f for 100,000", f, allocs[0], allocs[1])
		}
		t.Logf("%+v: %.0f allocations for 10,000 series, %.0f for 100,000", f, allocs[0], allocs[1])
	}
}

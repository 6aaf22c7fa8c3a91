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

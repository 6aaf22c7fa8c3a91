package backfill

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/pcp-exporter/pcp-exporter/bridge"
	"github.com/pcp-exporter/pcp-exporter/mapping"
)

// Exporter is the part of an OTLP metric exporter (otlpmetricgrpc,
// otlpmetrichttp) the OTLP sink uses.
type Exporter interface {
	Export(context.Context, *metricdata.ResourceMetrics) error
	Shutdown(context.Context) error
}

// OTLPSink sends samples with their original timestamps through an OTLP
// exporter: counters as monotonic cumulative sums (start time: the series'
// first sample, renewed when it goes down), other metrics as gauges, named
// with their PCP names and UCUM units as the live push names them. A failed
// export (after the exporter's retries) stops the backfill.
type OTLPSink struct {
	exp    Exporter
	ctx    context.Context
	starts map[*Series]*counterStart
}

type counterStart struct {
	start time.Time
	last  float64
}

// NewOTLPSink sends through exp.
func NewOTLPSink(ctx context.Context, exp Exporter) *OTLPSink {
	return &OTLPSink{exp: exp, ctx: ctx, starts: map[*Series]*counterStart{}}
}

// Write exports one batch as one request per host.
func (s *OTLPSink) Write(batch []Sample) (int, error) {
	type key struct {
		res  string
		name string
	}
	resources := map[string]*resource.Resource{}
	var resOrder []string
	metrics := map[key]*metricdata.Metrics{}
	var order []key
	for i := range batch {
		smp := &batch[i]
		f := smp.Series.Family
		if f.Name == mapping.TargetInfoName {
			continue // the resource
		}
		// the live push's resource and attributes (one mapping)
		rkey := resourceKey(smp.Series.Resource)
		if _, ok := resources[rkey]; !ok {
			resources[rkey] = bridge.ResourceOf(smp.Series.Resource)
			resOrder = append(resOrder, rkey)
		}
		attrs := make([]attribute.KeyValue, len(smp.Series.Attrs))
		for i, l := range smp.Series.Attrs {
			attrs[i] = attribute.String(l.Name, l.Value)
		}
		k := key{rkey, f.PCPName}
		m := metrics[k]
		if m == nil {
			m = &metricdata.Metrics{Name: f.PCPName, Description: f.Help, Unit: f.UCUM}
			if f.Type == mapping.Counter {
				m.Data = metricdata.Sum[float64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: true}
			} else {
				m.Data = metricdata.Gauge[float64]{}
			}
			metrics[k] = m
			order = append(order, k)
		}
		t := time.UnixMilli(smp.T)
		pt := metricdata.DataPoint[float64]{Attributes: attribute.NewSet(attrs...), Time: t, Value: smp.V}
		switch d := m.Data.(type) {
		case metricdata.Sum[float64]:
			st := s.starts[smp.Series]
			if st == nil {
				st = &counterStart{start: t}
				s.starts[smp.Series] = st
			} else if smp.V < st.last {
				st.start = t
			}
			st.last = smp.V
			pt.StartTime = st.start
			d.DataPoints = append(d.DataPoints, pt)
			m.Data = d
		case metricdata.Gauge[float64]:
			d.DataPoints = append(d.DataPoints, pt)
			m.Data = d
		}
	}
	for _, rk := range resOrder {
		rm := metricdata.ResourceMetrics{Resource: resources[rk], ScopeMetrics: []metricdata.ScopeMetrics{{Scope: bridge.Scope}}}
		for _, k := range order {
			if k.res == rk {
				rm.ScopeMetrics[0].Metrics = append(rm.ScopeMetrics[0].Metrics, *metrics[k])
			}
		}
		if err := s.exp.Export(s.ctx, &rm); err != nil {
			return 0, fmt.Errorf("otlp: %w", err)
		}
	}
	return 0, nil
}

// resourceKey identifies a resource's attributes.
func resourceKey(attrs []mapping.LabelPair) string {
	var b strings.Builder
	for _, p := range attrs {
		b.WriteString(p.Name)
		b.WriteByte(0)
		b.WriteString(p.Value)
		b.WriteByte(0)
	}
	return b.String()
}

// Close shuts the exporter down.
func (s *OTLPSink) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.exp.Shutdown(ctx)
}

package backfill

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"

	"github.com/pcp-exporter/pcp-exporter/bridge"
	"github.com/pcp-exporter/pcp-exporter/mapping"
)

// Exporter is the part of an OTLP metric exporter (otlpmetricgrpc,
// otlpmetrichttp) the OTLP sink uses.
type Exporter interface {
	Export(context.Context, *metricdata.ResourceMetrics) error
	Shutdown(context.Context) error
}

// resourceLabels are the series labels that describe the source host: they
// go to the OTLP resource, with their semantic-convention names.
var resourceLabels = map[string]string{"hostname": string(semconv.HostNameKey), "machineid": string(semconv.HostIDKey), "domainname": "host.domain"}

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
		var resAttrs, attrs []attribute.KeyValue
		for _, l := range smp.Series.Labels {
			if l.Name == "__name__" {
				continue
			}
			if rn, ok := resourceLabels[l.Name]; ok {
				resAttrs = append(resAttrs, attribute.String(rn, l.Value))
				continue
			}
			attrs = append(attrs, attribute.String(l.Name, l.Value))
		}
		resAttrs = append(resAttrs, semconv.ServiceName("pcp-exporter"))
		rset := attribute.NewSet(resAttrs...)
		rkey := rset.Encoded(attribute.DefaultEncoder())
		if _, ok := resources[rkey]; !ok {
			resources[rkey] = resource.NewSchemaless(resAttrs...)
			resOrder = append(resOrder, rkey)
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

// Close shuts the exporter down.
func (s *OTLPSink) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.exp.Shutdown(ctx)
}

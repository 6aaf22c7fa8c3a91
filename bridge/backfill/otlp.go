package backfill

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
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
// exporter: counters as monotonic cumulative sums (start time: Sample.Start,
// the live push's rule), other metrics as gauges, named
// with their PCP names and UCUM units as the live push names them. A failed
// export (after the exporter's retries) stops the backfill; data points a
// receiver refuses in a partial success are counted as rejected.
//
// Idempotence: a retried or rerun export is stored again by receivers that
// keep every point (the collector passes each on); a Prometheus receiver
// behind it ignores equal samples, VictoriaMetrics needs
// -dedup.minScrapeInterval.
type OTLPSink struct {
	exp Exporter
}

// NewOTLPSink sends through exp.
func NewOTLPSink(exp Exporter) *OTLPSink {
	return &OTLPSink{exp: exp}
}

// Write exports one batch as one request per host.
func (s *OTLPSink) Write(ctx context.Context, batch []Sample) (Outcome, error) {
	type key struct {
		res  string
		name string
	}
	resources := map[string]*resource.Resource{}
	var resOrder []string
	points := map[string]int{} // by resource
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
		points[rkey]++
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
			pt.StartTime = time.Unix(0, smp.Start)
			d.DataPoints = append(d.DataPoints, pt)
			m.Data = d
		case metricdata.Gauge[float64]:
			d.DataPoints = append(d.DataPoints, pt)
			m.Data = d
		}
	}
	var out Outcome
	for _, rk := range resOrder {
		rm := metricdata.ResourceMetrics{Resource: resources[rk], ScopeMetrics: []metricdata.ScopeMetrics{{Scope: bridge.Scope}}}
		for _, k := range order {
			if k.res == rk {
				rm.ScopeMetrics[0].Metrics = append(rm.ScopeMetrics[0].Metrics, *metrics[k])
			}
		}
		err := s.exp.Export(ctx, &rm)
		n := points[rk]
		if err != nil {
			rej, msg, ok := partialSuccess(err)
			if !ok {
				return out, fmt.Errorf("otlp: %w", err)
			}
			rej = min(rej, n)
			out.Rejected = append(out.Rejected, Rejection{Reason: "partial success", N: rej, Detail: msg})
			n -= rej
		}
		out.Accepted += n
	}
	return out, nil
}

// partialSuccessRE matches the error the OTLP exporters return for a
// partial success (their internal PartialSuccess type's text).
var partialSuccessRE = regexp.MustCompile(`^OTLP partial success: (.*) \((\d+) metric data points rejected\)$`)

// partialSuccess reads the rejected count and message of a partial
// success: every error at the leaves of err's tree must be one; ok is false
// otherwise.
func partialSuccess(err error) (rejected int, msg string, ok bool) {
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			n, m, ok := partialSuccess(e)
			if !ok {
				return 0, "", false
			}
			rejected, msg = rejected+n, m
		}
		return rejected, msg, rejected > 0 || msg != ""
	case interface{ Unwrap() error }:
		return partialSuccess(u.Unwrap())
	}
	m := partialSuccessRE.FindStringSubmatch(err.Error())
	if m == nil {
		return 0, "", false
	}
	n, _ := strconv.Atoi(m[2])
	return n, "OTLP partial success: " + m[1], true
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

package bridge

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// Scope is the instrumentation scope of the metrics this bridge produces.
var Scope = instrumentation.Scope{Name: "github.com/pcp-exporter/pcp-exporter/bridge"}

// Resource returns the OpenTelemetry resource of a source: its target
// labels after the semantic conventions (mapping.Resource: host.name,
// host.id, service.name, service.instance.id, pcp.*), under what
// OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME say.
func Resource(mapper *mapping.Mapper, src Source) *resource.Resource {
	ms := src.Src.Metrics()
	return ResourceOf(mapper.Resource(ms, mapper.TargetLabels(ms, src.Context)))
}

// ResourceOf is the resource of attributes from mapping.Resource, under
// what OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME say.
func ResourceOf(attrs []mapping.LabelPair) *resource.Resource {
	kvs := make([]attribute.KeyValue, len(attrs))
	for i, p := range attrs {
		kvs[i] = attribute.String(p.Name, p.Value)
	}
	r, err := resource.Merge(resource.NewSchemaless(kvs...), resource.Environment())
	if err != nil {
		return resource.NewSchemaless(kvs...)
	}
	return r
}

// OTelBatch encodes mapped values as OpenTelemetry metric data, one
// ResourceMetrics per resource: the one OTLP encoding of the live push
// and the OTLP backfill. A family (mapped by the mapper's OTel form) is
// an instrument (mapping.Family.Instrument): counters are monotonic
// cumulative sums with a start time, the others gauges, a STRING metric a
// gauge of 1 whose value is the "value" attribute.
type OTelBatch struct {
	res   []*otelResource
	byKey map[string]*otelResource
}

type otelResource struct {
	attrs   []mapping.LabelPair
	metrics map[string]*otelMetric
	points  int
}

type otelMetric struct {
	in  mapping.Instrument
	pts []metricdata.DataPoint[float64]
}

// Add adds one value of family f at t (start: a counter's start) with the
// data-point attributes attrs, under the resource of attributes res (key
// identifies them: ResourceKey).
func (b *OTelBatch) Add(key string, res []mapping.LabelPair, f *mapping.Family, attrs attribute.Set, start, t time.Time, v float64) {
	r := b.byKey[key]
	if r == nil {
		if b.byKey == nil {
			b.byKey = map[string]*otelResource{}
		}
		r = &otelResource{attrs: res, metrics: map[string]*otelMetric{}}
		b.byKey[key] = r
		b.res = append(b.res, r)
	}
	in := f.Instrument()
	m := r.metrics[in.Name]
	if m == nil {
		m = &otelMetric{in: in}
		r.metrics[in.Name] = m
	}
	pt := metricdata.DataPoint[float64]{Attributes: attrs, Time: t, Value: v}
	if m.in.Kind == mapping.KindSum && !m.in.String {
		pt.StartTime = start
	}
	m.pts = append(m.pts, pt)
	r.points++
}

// Len is the number of data points added.
func (b *OTelBatch) Len() int {
	n := 0
	for _, r := range b.res {
		n += r.points
	}
	return n
}

// ResourceMetrics returns the batch, one ResourceMetrics per resource in
// the order of their first value, each with its metrics by name, and the
// number of data points of each.
func (b *OTelBatch) ResourceMetrics() ([]metricdata.ResourceMetrics, []int) {
	out := make([]metricdata.ResourceMetrics, 0, len(b.res))
	points := make([]int, 0, len(b.res))
	for _, r := range b.res {
		ms := make([]metricdata.Metrics, 0, len(r.metrics))
		for _, m := range r.metrics {
			md := metricdata.Metrics{Name: m.in.Name, Description: m.in.Description, Unit: m.in.Unit}
			if m.in.Kind == mapping.KindSum && !m.in.String {
				md.Data = metricdata.Sum[float64]{DataPoints: m.pts, Temporality: metricdata.CumulativeTemporality, IsMonotonic: m.in.Monotonic}
			} else {
				md.Data = metricdata.Gauge[float64]{DataPoints: m.pts}
			}
			if m.in.Int {
				md.Data = IntData(md.Data) // a hostmetrics metric of value_type int
			}
			ms = append(ms, md)
		}
		sort.Slice(ms, func(i, j int) bool { return ms[i].Name < ms[j].Name })
		out = append(out, metricdata.ResourceMetrics{Resource: ResourceOf(r.attrs), ScopeMetrics: []metricdata.ScopeMetrics{{Scope: Scope, Metrics: ms}}})
		points = append(points, r.points)
	}
	return out, points
}

// ResourceKey identifies a resource's attributes, or any label set: each
// name and value followed by a 0 byte.
func ResourceKey(attrs []mapping.LabelPair) string {
	var b strings.Builder
	for _, p := range attrs {
		b.WriteString(p.Name)
		b.WriteByte(0)
		b.WriteString(p.Value)
		b.WriteByte(0)
	}
	return b.String()
}

// OTelAttributes returns a series' data-point attributes: the family's
// (mapping.Family.Attributes) and, for a STRING metric, its value.
func OTelAttributes(f *mapping.Family, inst *source.Instance, v source.InstValue) attribute.Set {
	pairs := f.Attributes(inst)
	kvs := make([]attribute.KeyValue, 0, len(pairs)+1)
	for _, p := range pairs {
		kvs = append(kvs, attribute.String(p.Name, p.Value))
	}
	if f.Type == mapping.Info {
		kvs = append(kvs, attribute.String(mapping.InfoValueLabel, strings.ToValidUTF8(v.Value.Str(), "\uFFFD")))
	}
	return attribute.NewSet(kvs...)
}

// OTelProducer reads a Collector's sources for the OpenTelemetry outputs:
// each read goes through the Collector (the sources the scrapes read,
// opened once; one epoch check, one instance lookup), its values mapped by
// the mapper's OTel form and encoded by OTelBatch, one resource per host
// (sources of one hostname, pmcd and the MMV directory beside it, as
// target_info merges them). It keeps per series what cumulative sums
// need: the start time (the source's generation, else the first value
// seen, renewed after a gap or when the counter goes down).
type OTelProducer struct {
	col   *Collector
	mu    sync.Mutex
	state map[string]*CounterStart
	seen  map[string]bool // series with a value at the previous read
}

// NewOTelProducer returns a producer over sources of its own (a Collector
// that serves no scrape).
func NewOTelProducer(mapper *mapping.Mapper, logger *slog.Logger, sources ...Source) *OTelProducer {
	return New(mapper, logger, sources...).OTel()
}

// OTel returns a producer reading the collector's sources: from then on
// every remap maps them for OpenTelemetry as well.
func (c *Collector) OTel() *OTelProducer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.otel = true
	for _, s := range c.sources {
		s.sig = 0 // remap at the next read
	}
	return &OTelProducer{col: c, state: map[string]*CounterStart{}, seen: map[string]bool{}}
}

// Read reads every source at now (a replay at the time its When gives) and
// returns the values, one ResourceMetrics per host, with the number of
// data points of each; err reports the sources whose read failed (the
// others' values are returned).
func (p *OTelProducer) Read(now time.Time) ([]metricdata.ResourceMetrics, []int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.col
	c.mu.Lock()
	defer c.mu.Unlock()
	type point struct {
		s     *sourceState
		f     *mapping.Family
		attrs attribute.Set
		start time.Time
		v     float64
	}
	var pts []point
	seenNow := map[string]bool{}
	c.read(now, nil, true, func(s *sourceState, i int, f *mapping.Family, iv source.InstValue, inst *source.Instance) {
		attrs := OTelAttributes(f, inst, iv)
		if f.Type == mapping.Info {
			pts = append(pts, point{s, f, attrs, time.Time{}, 1})
			return
		}
		v := f.OTelValue(iv.Value)
		var start time.Time
		if f.Type == mapping.Counter {
			key := s.Name + "\xff" + f.OTelName + "\xff" + attrs.Encoded(attribute.DefaultEncoder())
			seenNow[key] = true
			st := p.state[key]
			if st == nil {
				st = &CounterStart{}
				p.state[key] = st
			}
			start = st.Observe(v, s.at, source.GenerationOf(s.Src, f.Desc.PMID), p.seen[key])
		}
		pts = append(pts, point{s, f, attrs, start, v})
	}, nil)
	p.seen = seenNow
	res := c.hostResources()
	var b OTelBatch
	for _, pt := range pts {
		r := res[pt.s]
		b.Add(r.key, r.attrs, pt.f, pt.attrs, pt.start, pt.s.at, pt.v)
	}
	var errs []error
	for _, s := range c.sources {
		if s.status.Reason == source.ReasonError {
			errs = append(errs, errors.New(s.status.Detail))
		}
	}
	rms, points := b.ResourceMetrics()
	return rms, points, errors.Join(errs...)
}

// hostResource is the OpenTelemetry resource of a host's sources.
type hostResource struct {
	key   string
	attrs []mapping.LabelPair
}

// hostResources returns the resource of every source: sources of one host
// (the same hostname target label, as target_info merges them: pmcd and
// the MMV directory beside it) share one, of their merged target labels
// (the mapper's Resource over all their metrics).
func (c *Collector) hostResources() map[*sourceState]hostResource {
	type host struct {
		target []mapping.LabelPair
		ms     []source.Metric
		srcs   []*sourceState
	}
	var hosts []*host
	byName := map[string]*host{}
	for _, s := range c.sources {
		name, ok := hostname(s.target)
		if !ok {
			name = "\x00" + ResourceKey(s.target) // no hostname: the same target labels
		}
		h := byName[name]
		if h == nil {
			h = &host{}
			byName[name] = h
			hosts = append(hosts, h)
		}
		h.target = mergeLabels(h.target, s.target)
		h.ms = append(h.ms, s.ms...)
		h.srcs = append(h.srcs, s)
	}
	out := make(map[*sourceState]hostResource, len(c.sources))
	for _, h := range hosts {
		attrs := c.mapper.OTel().Resource(h.ms, h.target)
		r := hostResource{key: ResourceKey(attrs), attrs: attrs}
		for _, s := range h.srcs {
			out[s] = r
		}
	}
	return out
}

// Produce implements go.opentelemetry.io/otel/sdk/metric.Producer: the
// metrics of every resource in one scope, by name.
func (p *OTelProducer) Produce(context.Context) ([]metricdata.ScopeMetrics, error) {
	rms, _, err := p.Read(time.Now())
	var out []metricdata.Metrics
	for _, rm := range rms {
		out = append(out, rm.ScopeMetrics[0].Metrics...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return []metricdata.ScopeMetrics{{Scope: Scope, Metrics: out}}, err
}

// Reconfigure swaps the mapper and, when srcs is not nil, the sources'
// readers of the producer's Collector (Collector.Reconfigure).
func (p *OTelProducer) Reconfigure(mapper *mapping.Mapper, srcs []source.Source) error {
	return p.col.Reconfigure(mapper, srcs)
}

// Sources returns the readers of the producer's sources, in order.
func (p *OTelProducer) Sources() []source.Source { return p.col.Sources() }

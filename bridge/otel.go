package bridge

import (
	"context"
	"fmt"
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
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// Scope is the instrumentation scope of the metrics this bridge produces.
var Scope = instrumentation.Scope{Name: "github.com/pcp-exporter/pcp-exporter/bridge"}

// OTelConverter turns PCP values into OpenTelemetry metric data, keeping
// per series what cumulative sums need: the start time (the MMV file's
// generation, else the first value seen, renewed after a gap or when the
// counter goes down) and the last value. One converter serves one stream of
// increasing times (live push, or one backfill).
type OTelConverter struct {
	mapper *mapping.Mapper
	mu     sync.Mutex
	state  map[string]*CounterStart
	seen   map[string]bool // series with a value at the previous conversion
}

// NewOTelConverter returns a converter using mapper's instruments.
func NewOTelConverter(mapper *mapping.Mapper) *OTelConverter {
	return &OTelConverter{mapper: mapper, state: map[string]*CounterStart{}, seen: map[string]bool{}}
}

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

// Convert appends the metrics of one fetch result (res, for metrics ms in
// the same order) at time t.
func (c *OTelConverter) Convert(dst []metricdata.Metrics, src source.Source, ms []source.Metric, res *source.Result, t time.Time) []metricdata.Metrics {
	c.mu.Lock()
	defer c.mu.Unlock()
	seenNow := map[string]bool{}
	insts := map[semantics.InDom]map[int32]*source.Instance{}
	instance := func(indom semantics.InDom, id int32) *source.Instance {
		m, ok := insts[indom]
		if !ok {
			m = map[int32]*source.Instance{}
			ins, _ := source.InstancesInForce(src, indom, t)
			for i := range ins {
				m[ins[i].ID] = &ins[i]
			}
			insts[indom] = m
		}
		if in := m[id]; in != nil {
			return in
		}
		return &source.Instance{ID: id, Name: fmt.Sprint(id)}
	}
	for i := range ms {
		if i >= len(res.Sets) {
			break
		}
		set := &res.Sets[i]
		md := &ms[i]
		ins, skip := c.mapper.Instrument(md)
		if skip != "" || set.Err != nil || len(set.Values) == 0 {
			continue
		}
		var sum []metricdata.DataPoint[float64]
		var gauge []metricdata.DataPoint[float64]
		for _, iv := range set.Values {
			var inst *source.Instance
			if md.Desc.InDom != semantics.InDomNull {
				inst = instance(md.Desc.InDom, iv.Inst)
			}
			pairs := ins.Attributes(inst)
			kvs := make([]attribute.KeyValue, 0, len(pairs)+1)
			for _, p := range pairs {
				kvs = append(kvs, attribute.String(p.Name, p.Value))
			}
			if ins.String {
				kvs = append(kvs, attribute.String(mapping.InfoValueLabel, strings.ToValidUTF8(iv.Value.Str(), "\uFFFD")))
				gauge = append(gauge, metricdata.DataPoint[float64]{Attributes: attribute.NewSet(kvs...), Time: t, Value: 1})
				continue
			}
			v := iv.Value.Float64() * ins.Scale
			set := attribute.NewSet(kvs...)
			if ins.Kind != mapping.KindSum {
				gauge = append(gauge, metricdata.DataPoint[float64]{Attributes: set, Time: t, Value: v})
				continue
			}
			key := md.Name + "\xff" + set.Encoded(attribute.DefaultEncoder())
			seenNow[key] = true
			st := c.state[key]
			if st == nil {
				st = &CounterStart{}
				c.state[key] = st
			}
			g := source.GenerationOf(src, md.Desc.PMID)
			obs := v
			if !ins.Monotonic {
				obs = 0 // an up-down sum keeps its start when it goes down
			}
			start := st.Observe(obs, t, g, c.seen[key])
			sum = append(sum, metricdata.DataPoint[float64]{Attributes: set, StartTime: start, Time: t, Value: v})
		}
		m := metricdata.Metrics{Name: ins.Name, Description: ins.Description, Unit: ins.Unit}
		if ins.Kind == mapping.KindSum && !ins.String {
			m.Data = metricdata.Sum[float64]{DataPoints: sum, Temporality: metricdata.CumulativeTemporality, IsMonotonic: ins.Monotonic}
		} else {
			m.Data = metricdata.Gauge[float64]{DataPoints: gauge}
		}
		if ins.Int {
			m.Data = IntData(m.Data)
		}
		dst = append(dst, m)
	}
	c.seen = seenNow
	return dst
}

// pinnedSource answers the instances and generations of one fetch as they
// were right after it, so that a conversion does not see a later metric set.
type pinnedSource struct {
	source.Source
	insts map[semantics.InDom][]source.Instance
	gens  map[semantics.PMID]time.Time
}

func pinSource(src source.Source, ms []source.Metric, res *source.Result, t time.Time) *pinnedSource {
	p := &pinnedSource{Source: src, insts: map[semantics.InDom][]source.Instance{}, gens: map[semantics.PMID]time.Time{}}
	for i := range ms {
		if i >= len(res.Sets) || res.Sets[i].Err != nil || len(res.Sets[i].Values) == 0 {
			continue
		}
		d := &ms[i].Desc
		if _, ok := p.insts[d.InDom]; !ok && d.InDom != semantics.InDomNull {
			p.insts[d.InDom], _ = source.InstancesInForce(src, d.InDom, t)
		}
		if g := source.GenerationOf(src, d.PMID); !g.IsZero() {
			p.gens[d.PMID] = g
		}
	}
	return p
}

// Instances returns the instances read after the fetch.
func (p *pinnedSource) Instances(indom semantics.InDom) []source.Instance {
	if in, ok := p.insts[indom]; ok {
		return in
	}
	return p.Source.Instances(indom)
}

// Generation returns the generation read after the fetch (zero: none).
func (p *pinnedSource) Generation(pmid semantics.PMID) time.Time { return p.gens[pmid] }

// OTelProducer is an sdk/metric Producer over PCP sources: every collection
// fetches them (at the time their When gives) and converts the values.
type OTelProducer struct {
	sources []Source
	conv    *OTelConverter
	logger  *slog.Logger
	mu      sync.Mutex
	res     source.Result
}

// NewOTelProducer returns a producer over sources.
func NewOTelProducer(mapper *mapping.Mapper, logger *slog.Logger, sources ...Source) *OTelProducer {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	srcs := make([]Source, len(sources))
	for i, s := range sources {
		s.Src = mapper.Wrap(s.Src) // the node naming's families
		srcs[i] = s
	}
	return &OTelProducer{sources: srcs, conv: NewOTelConverter(mapper), logger: logger}
}

// Produce implements go.opentelemetry.io/otel/sdk/metric.Producer.
func (p *OTelProducer) Produce(context.Context) ([]metricdata.ScopeMetrics, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	var out []metricdata.Metrics
	var firstErr error
	for _, s := range p.sources {
		t := now
		if s.When != nil {
			var ok bool
			if t, ok = s.When(now); !ok {
				continue
			}
		}
		// as the collector does: read again until the metrics, the values,
		// the instances and the generations come from one metric set (an
		// MMV directory rescan renumbers PMIDs)
		var ms []source.Metric
		var pin *pinnedSource
		var err error
		for attempt := 0; ; attempt++ {
			var e uint64
			ms, e = source.MetricsEpochOf(s.Src)
			pmids := make([]semantics.PMID, len(ms))
			for i := range ms {
				pmids[i] = ms[i].Desc.PMID
			}
			if err = s.Src.Fetch(t, pmids, &p.res); err != nil {
				break
			}
			pin = pinSource(s.Src, ms, &p.res, t)
			if source.EpochOf(s.Src) == e {
				break
			}
			if attempt == 3 {
				err = fmt.Errorf("metrics kept changing during %d reads", attempt+1)
				break
			}
		}
		if err != nil {
			p.logger.Warn("reading PCP source for OTLP failed", "source", s.Name, "err", err)
			if firstErr == nil {
				firstErr = fmt.Errorf("%s: %w", s.Name, err)
			}
			continue
		}
		out = p.conv.Convert(out, pin, ms, &p.res, t)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return []metricdata.ScopeMetrics{{Scope: Scope, Metrics: out}}, firstErr
}

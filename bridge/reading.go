package bridge

import (
	"time"

	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// The Collector's read for a caller that chooses the times itself
// (backfill's interpolated replay on a grid): the same reading as a
// scrape's and a push's (the mapped families, each value's instance named
// as at the time read, the epoch retry, the counters' generations), handed
// value by value to the caller, who only encodes it.

// ReadOptions shape the reads of a collector that serves no scrape.
type ReadOptions struct {
	// Keep, when set, selects the families read: the others are mapped
	// (their names taken) but not fetched.
	Keep func(f *mapping.Family) bool
	// Namespace, when set, are the target labels of every source of the
	// output (mapping.NewNamespace: the labels that tell them apart stay
	// on the series), instead of the collector's sources' own.
	Namespace [][]mapping.LabelPair
}

// SetReadOptions sets o; the sources are mapped again at the next read.
func (c *Collector) SetReadOptions(o ReadOptions) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keep, c.namespace = o.Keep, o.Namespace
	for _, s := range c.sources {
		s.sig = 0
	}
}

// newNamespace is the namespace of the sources of these target labels, or
// the ReadOptions' one.
func (c *Collector) newNamespace(targets [][]mapping.LabelPair) *mapping.Namespace {
	if c.namespace != nil {
		return mapping.NewNamespace(c.namespace...)
	}
	return mapping.NewNamespace(targets...)
}

// kept returns the families ReadOptions.Keep keeps (fams, in place).
func (c *Collector) kept(fams []mapping.Family) []mapping.Family {
	if c.keep == nil {
		return fams
	}
	out := fams[:0]
	for i := range fams {
		if c.keep(&fams[i]) {
			out = append(out, fams[i])
		}
	}
	return out
}

// Value is one value of a read.
type Value struct {
	// Source numbers the value's source (New's order); Index is its
	// family's place among the source's families (Mapped), Pos the
	// value's place in its value set.
	Source, Index, Pos int
	Family             *mapping.Family
	// Inst is the value's instance, named as at T (nil: a singular metric).
	Inst *source.Instance
	IV   source.InstValue
	// T is the time read.
	T time.Time
	// Gen is a counter's generation at T (source.Generations; zero:
	// unknown, or not a counter): the start bridge.CounterStart follows.
	Gen time.Time
}

// Failed is a value set a source answered with an error instead of values.
type Failed struct {
	Source, Index int
	Family        *mapping.Family
	Err           error
}

// ReadAt reads every source at t (their When is not applied) and hands
// every value to value, and every value set answered with an error to
// failed, in source and family order: the Prometheus families, or with
// otel the OpenTelemetry ones (Collector.OTel). It returns the sources'
// errors, unwrapped (semantics.ErrEOL past an archive's end). The Value
// handed is reused from one value to the next.
func (c *Collector) ReadAt(t time.Time, otel bool, value func(*Value), failed func(*Failed)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var v Value
	lastS, lastI := (*sourceState)(nil), -1
	index := map[*sourceState]int{}
	for i, s := range c.sources {
		index[s] = i
	}
	var onFailed failedVisitor
	if failed != nil {
		onFailed = func(s *sourceState, i int, f *mapping.Family, err error) {
			failed(&Failed{Source: index[s], Index: i, Family: f, Err: err})
		}
	}
	return c.read(t, nil, otel, func(s *sourceState, i int, f *mapping.Family, iv source.InstValue, inst *source.Instance) {
		if s != lastS || i != lastI {
			lastS, lastI = s, i
			v = Value{Source: index[s], Index: i, Family: f, T: s.at, Pos: -1}
			if f.Type == mapping.Counter {
				v.Gen = source.GenerationOf(s.Src, f.Desc.PMID)
			}
		}
		v.Inst, v.IV = inst, iv
		v.Pos++
		value(&v)
	}, onFailed)
}

// Mapped is what the collector mapped a source into (after loading its
// metrics, when they changed).
type Mapped struct {
	// Metrics are the source's metrics (wrapped by the mapper: the node
	// naming's families), Target its target labels.
	Metrics []source.Metric
	Target  []mapping.LabelPair
	// Families are the families read (ReadOptions.Keep's), Skipped the
	// metrics the mapping skipped.
	Families []mapping.Family
	Skipped  []mapping.Skipped
}

// Mapped returns source i's mapping: the Prometheus families, or with otel
// the OpenTelemetry ones.
func (c *Collector) Mapped(i int, otel bool) Mapped {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loadMetrics()
	s := c.sources[i]
	fams, _ := s.view(otel)
	return Mapped{Metrics: s.ms, Target: s.target, Families: fams, Skipped: s.skipped}
}

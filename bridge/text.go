package bridge

import (
	"io"
	"strings"
	"sync"
	"time"
	"unique"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// textCache holds the rendered label block of every series, so a scrape
// renders only names and values: per family, by the position of the value
// in the fetch (instances come in the same order scrape after scrape),
// checked against the instance id and name (an id can come back with
// another name: a PID reused in an archive of proc metrics). It is dropped
// when the source's metric set or epoch changes (an MMV file re-created
// with other instances or labels). It serves both formats: the label block
// is the same in text and OpenMetrics. The series of all families are
// kept in one slice (family i's from at[i] to at[i+1]): a slice per
// family cost a pooled /probe target more than its series. A family
// that gains series during a scrape gets them in grown (its whole list),
// merged into series after the scrape (compact).
type textCache struct {
	sig    uint64
	epoch  uint64
	at     []int32
	series []cachedSeries
	grown  map[int][]cachedSeries
}

// family returns family i's cached series, the scrape's grown list if it
// has one.
func (t *textCache) family(i int) []cachedSeries {
	if t.grown != nil {
		if g, ok := t.grown[i]; ok {
			return g
		}
	}
	lo, hi := t.at[i], t.at[i+1]
	return t.series[lo:hi:hi]
}

// grow records family i's series list grown to ss.
func (t *textCache) grow(i int, ss []cachedSeries) {
	if t.grown == nil {
		t.grown = map[int][]cachedSeries{}
	}
	t.grown[i] = ss
}

// compact merges the grown families into series, sized exactly.
func (t *textCache) compact() {
	if len(t.grown) == 0 {
		return
	}
	n := 0
	for i := range len(t.at) - 1 {
		n += len(t.family(i))
	}
	series := make([]cachedSeries, 0, n)
	at := make([]int32, 1, len(t.at))
	for i := range len(t.at) - 1 {
		series = append(series, t.family(i)...)
		at = append(at, int32(len(series)))
	}
	t.series, t.at, t.grown = series, at, nil
}

type cachedSeries struct {
	inst int32
	name string
	// labels is the series' label block, interned: the series of pooled
	// /probe targets of one kind have the same blocks
	labels unique.Handle[string]
	start  *seriesStart // counters whose start is known
}

// seriesStart follows a counter series' start, with the value of its
// _created sample rendered.
type seriesStart struct {
	CounterStart
	ns int64 // the start rendered in v
	n  uint8
	v  [24]byte // the longest float64 'g' takes
}

// Format is what the fast path writes.
type Format struct {
	// OpenMetrics selects OpenMetrics 1.0.0: UNIT lines, info families
	// typed info, counters without _total in the family name; else the
	// text format 0.0.4.
	OpenMetrics bool
	// Created adds to OpenMetrics a _created sample after each counter
	// sample whose start is known (the source's generation: an MMV file's
	// creation, an archive's start or last <mark>, pmcd's start; see
	// CounterStart). Prometheus (2.x, and 3.x unless
	// created-timestamp ingestion is on) stores them as series of their
	// own, so it is off unless asked for, as in promhttp
	// (HandlerOpts.EnableOpenMetricsTextCreatedSamples).
	Created bool
}

// WriteText reads every source and writes their samples in the Prometheus
// text format 0.0.4, without building a client_golang metric per value:
// the fast path of /metrics. Families come source after source in the
// order the source lists its metrics (family names are unique across the
// sources of a Collector), series in instance order. The self-metrics go
// through Self.
func (c *Collector) WriteText(w io.Writer) error { return c.Write(w, Format{}) }

// WriteOpenMetrics is WriteText in OpenMetrics (with _created samples if
// created; see Format). The caller ends the exposition (self-metrics,
// then "# EOF").
func (c *Collector) WriteOpenMetrics(w io.Writer, created bool) error {
	return c.Write(w, Format{OpenMetrics: true, Created: created})
}

// Write writes the samples in format f, 64 KiB at a time.
func (c *Collector) Write(w io.Writer, f Format) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var err error
	write := func(b []byte) []byte {
		if err == nil {
			_, err = w.Write(b)
		}
		return b[:0]
	}
	bp := scratch.Get().(*[]byte)
	*bp = write(c.appendLocked((*bp)[:0], f, 64<<10, write))
	scratch.Put(bp)
	return err
}

// scratch holds Write's expositions between scrapes: shared by collectors
// (one per pooled /probe target) rather than one kept by each.
var scratch = sync.Pool{New: func() any { return new([]byte) }}

// AppendExposition appends the samples to b in format f. With flush, it
// hands b to flush between families once it holds flushAt bytes, and goes
// on with what flush returns.
func (c *Collector) AppendExposition(b []byte, f Format, flushAt int, flush func([]byte) []byte) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.appendLocked(b, f, flushAt, flush)
}

func (c *Collector) appendLocked(b []byte, format Format, flushAt int, flush func([]byte) []byte) []byte {
	om := format.OpenMetrics
	created := om && format.Created
	var genT time.Time
	c.reads++
	lastSrc, lastFam, pos := (*sourceState)(nil), -1, 0
	// with families shared by several sources, the sources' samples are
	// written into c.merge, then gathered family by family into b (a
	// source whose metrics change during the read, remapped then, is
	// merged from the next scrape on)
	c.loadMetrics()
	merging := c.shared
	var out []byte
	if merging {
		out, b = b, c.merge.start()
	}
	c.readLoaded(c.now(), nil, false, func(s *sourceState, i int, f *mapping.Family, iv source.InstValue, inst *source.Instance) {
		if s.text.sig != s.sig || s.text.epoch != s.epoch || len(s.text.at) != len(s.families)+1 {
			s.text = textCache{sig: s.sig, epoch: s.epoch, at: make([]int32, len(s.families)+1)}
		}
		if s != lastSrc || i != lastFam {
			lastSrc, lastFam, pos = s, i, 0
			if merging {
				c.merge.family(b, f.Name)
			} else if flush != nil && len(b) >= flushAt {
				b = flush(b)
			}
			b = AppendHeader(b, f, om)
			if merging {
				c.merge.body(b)
			}
			genT = time.Time{}
			if created && HasCreated(f) {
				genT = s.created(f, s.at)
			}
		}
		b = append(b, f.Name...)
		if f.Type == mapping.Info {
			b = AppendLabels(b, f.Labels(inst), strings.ToValidUTF8(iv.Value.Str(), "\uFFFD"))
			b = AppendFloat(b, 1, om)
			b = append(b, '\n')
			return
		}
		ss := s.text.family(i)
		if pos >= len(ss) {
			ss = append(ss, cachedSeries{inst: iv.Inst - 1})
			s.text.grow(i, ss)
		}
		name := ""
		if inst != nil {
			name = inst.Name
		}
		e := &ss[pos]
		pos++
		if e.inst != iv.Inst || e.name != name || e.labels == (unique.Handle[string]{}) {
			c.block = AppendLabels(c.block[:0], f.Labels(inst), "")
			*e = cachedSeries{inst: iv.Inst, name: name, labels: unique.Make(string(c.block))}
		}
		v := c.value(f, iv.Value)
		labels := e.labels.Value()
		b = append(b, labels...)
		b = AppendFloat(b, v, om)
		b = append(b, '\n')
		if !genT.IsZero() {
			if e.start == nil {
				e.start = &seriesStart{}
			}
			// continued: with a generation, a series that comes back
			// within it went on counting in the file
			st := e.start
			start := st.Observe(v, s.at, genT, true)
			if ns := start.UnixNano(); ns != st.ns || st.n == 0 {
				st.ns, st.n = ns, uint8(copy(st.v[:], AppendStart(st.v[:0], start)))
			}
			// AppendCreated's, with the interned block
			b = append(append(append(append(b, omName(f)...), "_created"...), labels...), st.v[:st.n]...)
			b = append(b, '\n')
		}
	}, nil)
	for _, s := range c.sources {
		s.text.compact()
	}
	if merging {
		b = c.merge.gather(out, b, flushAt, flush)
	}
	if targets := c.targets(nil); len(targets) > 0 {
		b = appendTargets(b, targets, om)
	}
	return b
}

// familyMerge gathers the samples of a family written by several sources
// (each source writes its families in turn) into one family: header once,
// then every source's series, families in the order first written. Text
// format and OpenMetrics both ask for a family's samples in one group.
type familyMerge struct {
	buf   []byte
	segs  []mergeSeg
	order []string
	of    map[string][]int // family name -> its segments
}

// mergeSeg is one source's part of a family in buf: its header from
// head, its samples from body to end.
type mergeSeg struct{ head, body, end int }

// start returns the buffer to write the sources' families into.
func (m *familyMerge) start() []byte {
	m.segs, m.order = m.segs[:0], m.order[:0]
	if m.of == nil {
		m.of = map[string][]int{}
	}
	clear(m.of)
	return m.buf[:0]
}

// family starts a family named name at the end of b.
func (m *familyMerge) family(b []byte, name string) {
	if n := len(m.segs); n > 0 {
		m.segs[n-1].end = len(b)
	}
	if _, ok := m.of[name]; !ok {
		m.order = append(m.order, name)
	}
	m.of[name] = append(m.of[name], len(m.segs))
	m.segs = append(m.segs, mergeSeg{head: len(b)})
}

// body marks the end of the header of the family started last.
func (m *familyMerge) body(b []byte) { m.segs[len(m.segs)-1].body = len(b) }

// gather appends the families written in b to out, merged, and keeps b
// for the next scrape.
func (m *familyMerge) gather(out, b []byte, flushAt int, flush func([]byte) []byte) []byte {
	if n := len(m.segs); n > 0 {
		m.segs[n-1].end = len(b)
	}
	m.buf = b
	for _, name := range m.order {
		if flush != nil && len(out) >= flushAt {
			out = flush(out)
		}
		for j, si := range m.of[name] {
			sg := m.segs[si]
			from := sg.body
			if j == 0 {
				from = sg.head
			}
			out = append(out, b[from:sg.end]...)
		}
	}
	return out
}

// samplesCollector sends a Collector's PCP samples (those sel selects)
// and target_info, without its self-metrics.
type samplesCollector struct {
	c   *Collector
	sel *Selection
}

func (s samplesCollector) Describe(chan<- *prometheus.Desc) {}
func (s samplesCollector) Collect(ch chan<- prometheus.Metric) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.c.read(s.c.now(), s.sel, false, func(src *sourceState, i int, f *mapping.Family, iv source.InstValue, inst *source.Instance) {
		s.c.sendConst(ch, src, i, f, iv, inst)
	}, nil)
	s.c.sendTargets(ch, s.sel)
}

// samplesGatherer gathers the PCP samples a selection selects.
type samplesGatherer struct {
	c   *Collector
	sel *Selection
}

func (g samplesGatherer) Gather() ([]*dto.MetricFamily, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(samplesCollector(g)); err != nil {
		return nil, err
	}
	return reg.Gather()
}

// SamplesOnly returns a collector of the PCP samples only (for scrapes
// served through client_golang next to Self).
func SamplesOnly(c *Collector) prometheus.Collector { return samplesCollector{c: c} }

// WithSamples returns a gatherer of the PCP samples followed by what others
// gathers (a registry holding Self and the process's own metrics): the full
// scrape that client_golang renders for formats the fast path does not
// write. The samples come first: the self-metrics describe that read.
func (c *Collector) WithSamples(others prometheus.Gatherer) prometheus.Gatherer {
	samples := prometheus.NewRegistry()
	samples.MustRegister(SamplesOnly(c))
	return prometheus.Gatherers{samples, others}
}

// selfCollector sends a Collector's self-metrics from its last read.
type selfCollector struct{ c *Collector }

func (s selfCollector) Describe(chan<- *prometheus.Desc) {}
func (s selfCollector) Collect(ch chan<- prometheus.Metric) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.c.sendSelf(ch)
}

// Self returns a collector of the self-metrics only (for the fast path,
// whose samples WriteText writes).
func (c *Collector) Self() prometheus.Collector { return selfCollector{c} }

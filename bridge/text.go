package bridge

import (
	"io"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
// is the same in text and OpenMetrics.
type textCache struct {
	sig    uint64
	epoch  uint64
	series [][]cachedSeries
	buf    [][]byte // each family's exposition, reused scrape after scrape
}

type cachedSeries struct {
	inst   int32
	name   string
	labels []byte
	start  CounterStart
	read   uint64 // the read that last wrote the series
	// created is the start last rendered as createdB, the _created line
	created  time.Time
	createdB []byte
}

// WriteText reads every source and writes their samples in the Prometheus
// text format 0.0.4, families sorted by name, without building a
// client_golang metric per value: the fast path of /metrics. Series are in
// instance order within a family. The self-metrics go through Self.
func (c *Collector) WriteText(w io.Writer) error { return c.write(w, false) }

// WriteOpenMetrics is WriteText in OpenMetrics 1.0.0: UNIT lines, info
// families typed info, and a _created sample after every counter sample
// whose start is known (the generation of the MMV file it comes from). The
// caller ends the exposition (self-metrics, then "# EOF").
func (c *Collector) WriteOpenMetrics(w io.Writer) error { return c.write(w, true) }

func (c *Collector) write(w io.Writer, om bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	type chunk struct {
		name string
		src  *sourceState
		fam  int
	}
	chunks := c.chunks[:0]
	var cur *[]byte
	var gen Generationer
	var genT time.Time
	c.reads++
	now := c.now()
	lastSrc, lastFam, pos := (*sourceState)(nil), -1, 0
	c.read(func(s *sourceState, i int, f *mapping.Family, iv source.InstValue, inst *source.Instance) {
		if s.text.sig != s.sig || s.text.epoch != s.epoch || len(s.text.series) != len(s.families) {
			s.text = textCache{sig: s.sig, epoch: s.epoch, series: make([][]cachedSeries, len(s.families)), buf: make([][]byte, len(s.families))}
		}
		if s != lastSrc || i != lastFam {
			if s != lastSrc {
				gen = Generations(s.Src)
			}
			lastSrc, lastFam, pos = s, i, 0
			chunks = append(chunks, chunk{name: f.Name, src: s, fam: i})
			cur = &s.text.buf[i]
			*cur = AppendHeader((*cur)[:0], f, om)
			genT = time.Time{}
			if gen != nil && f.Type == mapping.Counter && s.When == nil {
				if g := gen.Generation(f.Desc.PMID); !g.After(now) {
					genT = g
				}
			}
		}
		b := append(*cur, f.Name...)
		if f.Type == mapping.Info {
			b = AppendLabels(b, f.Labels(inst), strings.ToValidUTF8(iv.Value.Str(), "\uFFFD"))
			b = AppendFloat(b, 1, om)
			*cur = append(b, '\n')
			return
		}
		ss := s.text.series[i]
		if pos >= len(ss) {
			ss = append(ss, cachedSeries{inst: iv.Inst - 1})
			s.text.series[i] = ss
		}
		name := ""
		if inst != nil {
			name = inst.Name
		}
		e := &ss[pos]
		pos++
		if e.inst != iv.Inst || e.name != name || e.labels == nil {
			*e = cachedSeries{inst: iv.Inst, name: name, labels: AppendLabels(nil, f.Labels(inst), "")}
		}
		v := c.value(f, iv.Value)
		b = append(b, e.labels...)
		b = AppendFloat(b, v, om)
		b = append(b, '\n')
		if !genT.IsZero() {
			start := e.start.Observe(v, now, genT, e.read == c.reads-1)
			if om && HasCreated(f) {
				if !start.Equal(e.created) || e.createdB == nil {
					e.created = start
					e.createdB = append(AppendCreated(e.createdB[:0], f, e.labels, start), '\n')
				}
				b = append(b, e.createdB...)
			}
		}
		e.read = c.reads
		*cur = b
	})
	sort.SliceStable(chunks, func(i, j int) bool { return chunks[i].name < chunks[j].name })
	c.chunks = chunks
	for _, ch := range chunks {
		if _, err := w.Write(ch.src.text.buf[ch.fam]); err != nil {
			return err
		}
	}
	return nil
}

// samplesCollector sends a Collector's PCP samples without its self-metrics.
type samplesCollector struct{ c *Collector }

func (s samplesCollector) Describe(chan<- *prometheus.Desc) {}
func (s samplesCollector) Collect(ch chan<- prometheus.Metric) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.c.read(func(src *sourceState, i int, f *mapping.Family, iv source.InstValue, inst *source.Instance) {
		s.c.sendConst(ch, src, i, f, iv, inst)
	})
}

// SamplesOnly returns a collector of the PCP samples only (for scrapes
// served through client_golang next to Self).
func SamplesOnly(c *Collector) prometheus.Collector { return samplesCollector{c} }

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

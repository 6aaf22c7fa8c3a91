package bridge

import (
	"bytes"
	"compress/gzip"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// textCache holds the rendered "name{labels}" prefix of every series, so a
// scrape in the text format renders only values: per family, by the
// position of the value in the fetch (instances come in the same order
// scrape after scrape), checked against the instance id and name (an id
// can come back with another name: a PID reused in an archive of proc
// metrics). It is dropped when the source's metric set or epoch changes
// (an MMV file re-created with other instances or labels).
type textCache struct {
	sig    uint64
	epoch  uint64
	prefix [][]cachedPrefix
	buf    [][]byte // each family's text, reused scrape after scrape
}

type cachedPrefix struct {
	inst int32
	name string
	b    []byte
}

// WriteText reads every source and writes their samples in the Prometheus
// text format 0.0.4, families sorted by name, without building a
// client_golang metric per value: the fast path of /metrics. Series are in
// instance order within a family. The self-metrics go through Self.
func (c *Collector) WriteText(w io.Writer) error { return c.WriteTextSelected(w, nil) }

// WriteTextSelected is WriteText for the families sel selects (all when
// nil), target_info included when it is selected.
func (c *Collector) WriteTextSelected(w io.Writer, sel *Selection) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	type chunk struct {
		name string
		src  *sourceState
		fam  int
	}
	chunks := c.chunks[:0]
	var cur *[]byte
	lastSrc, lastFam, pos := (*sourceState)(nil), -1, 0
	c.read(sel, func(s *sourceState, i int, f *mapping.Family, iv source.InstValue, inst *source.Instance) {
		if s.text.sig != s.sig || s.text.epoch != s.epoch || len(s.text.prefix) != len(s.families) {
			s.text = textCache{sig: s.sig, epoch: s.epoch, prefix: make([][]cachedPrefix, len(s.families)), buf: make([][]byte, len(s.families))}
		}
		if s != lastSrc || i != lastFam {
			lastSrc, lastFam, pos = s, i, 0
			chunks = append(chunks, chunk{name: f.Name, src: s, fam: i})
			cur = &s.text.buf[i]
			*cur = appendHeader((*cur)[:0], f)
		}
		b := *cur
		if f.Type == mapping.Info {
			b = appendSeries(b, f.Name, f.Labels(inst), strings.ToValidUTF8(iv.Value.Str(), "\uFFFD"), true)
		} else {
			ps := s.text.prefix[i]
			if pos >= len(ps) {
				ps = append(ps, cachedPrefix{inst: iv.Inst - 1})
				s.text.prefix[i] = ps
			}
			name := ""
			if inst != nil {
				name = inst.Name
			}
			if ps[pos].inst != iv.Inst || ps[pos].name != name || ps[pos].b == nil {
				ps[pos] = cachedPrefix{inst: iv.Inst, name: name, b: appendSeries(nil, f.Name, f.Labels(inst), "", false)}
			}
			b = append(b, ps[pos].b...)
			pos++
		}
		b = appendFloat(b, c.value(f, iv.Value))
		*cur = append(b, '\n')
	})
	if targets := c.targets(sel); len(targets) > 0 {
		c.targetText = appendTargets(c.targetText[:0], targets)
		chunks = append(chunks, chunk{name: mapping.TargetInfoName, fam: -1})
	}
	sort.SliceStable(chunks, func(i, j int) bool { return chunks[i].name < chunks[j].name })
	c.chunks = chunks
	for _, ch := range chunks {
		b := c.targetText
		if ch.src != nil {
			b = ch.src.text.buf[ch.fam]
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

func appendHeader(b []byte, f *mapping.Family) []byte {
	if f.Help != "" {
		b = append(b, "# HELP "...)
		b = append(b, f.Name...)
		b = append(b, ' ')
		b = appendEscaped(b, f.Help, false)
		b = append(b, '\n')
	}
	b = append(b, "# TYPE "...)
	b = append(b, f.Name...)
	if f.Type == mapping.Counter {
		b = append(b, " counter\n"...)
	} else {
		b = append(b, " gauge\n"...)
	}
	return b
}

// appendSeries appends `name{labels} ` (with the info value label when
// info is set), labels sorted by name as client_golang writes them.
func appendSeries(b []byte, name string, labels []mapping.LabelPair, value string, info bool) []byte {
	if info {
		labels = append(append([]mapping.LabelPair(nil), labels...), mapping.LabelPair{Name: mapping.InfoValueLabel, Value: value})
		sort.Slice(labels, func(i, j int) bool { return labels[i].Name < labels[j].Name })
	}
	b = append(b, name...)
	if len(labels) > 0 {
		b = append(b, '{')
		for i, l := range labels {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, l.Name...)
			b = append(b, `="`...)
			b = appendEscaped(b, l.Value, true)
			b = append(b, '"')
		}
		b = append(b, '}')
	}
	return append(b, ' ')
}

// appendEscaped escapes as the text format does: backslash and newline,
// and double quotes in label values; invalid UTF-8 becomes U+FFFD.
func appendEscaped(b []byte, s string, quote bool) []byte {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, `\\`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '"' && quote:
			b = append(b, `\"`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// appendFloat writes a value as client_golang's text encoder does.
func appendFloat(b []byte, f float64) []byte {
	switch {
	case f == 1:
		return append(b, '1')
	case f == 0:
		return append(b, '0')
	case f == -1:
		return append(b, "-1"...)
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, +1):
		return append(b, "+Inf"...)
	case math.IsInf(f, -1):
		return append(b, "-Inf"...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
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
	s.c.read(s.sel, func(src *sourceState, i int, f *mapping.Family, iv source.InstValue, inst *source.Instance) {
		s.c.sendConst(ch, src, i, f, iv, inst)
	})
	s.c.sendTargets(ch, s.sel)
}

// samplesGatherer gathers the PCP samples a selection selects.
type samplesGatherer struct {
	c   *Collector
	sel *Selection
}

func (g samplesGatherer) Gather() ([]*dto.MetricFamily, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(samplesCollector{g.c, g.sel}); err != nil {
		return nil, err
	}
	return reg.Gather()
}

// SamplesOnly returns a collector of the PCP samples only (for scrapes
// served through client_golang next to Self).
func SamplesOnly(c *Collector) prometheus.Collector { return samplesCollector{c: c} }

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

// Handler serves /metrics: the text format through WriteText (plus the
// gatherer's metrics, which must include Self) when the scraper accepts
// it, else everything through client_golang (OpenMetrics, protobuf) with
// full, which must include the Collector itself. Like promhttp, the text
// response is gzipped (at gzip.BestSpeed: a scrape's latency matters more
// than its bytes) when the scraper accepts it, unless
// opts.DisableCompression; an uncompressed one carries its Content-Length.
// The buffer that holds the response is reused from scrape to scrape.
func (c *Collector) Handler(fast, full prometheus.Gatherer, opts promhttp.HandlerOpts) http.Handler {
	slow := promhttp.HandlerFor(full, opts)
	var inFlight chan struct{}
	if opts.MaxRequestsInFlight > 0 {
		inFlight = make(chan struct{}, opts.MaxRequestsInFlight)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sel := SelectionFrom(r.URL.Query())
		if expfmt.NegotiateIncludingOpenMetrics(r.Header).FormatType() != expfmt.TypeTextPlain {
			if sel.Subtrees() {
				// promhttp applies name[] itself
				promhttp.HandlerFor(prometheus.Gatherers{samplesGatherer{c, sel}, fast}, opts).ServeHTTP(w, r)
				return
			}
			slow.ServeHTTP(w, r)
			return
		}
		if inFlight != nil {
			select {
			case inFlight <- struct{}{}:
				defer func() { <-inFlight }()
			default:
				http.Error(w, "too many concurrent scrapes", http.StatusServiceUnavailable)
				return
			}
		}
		buf := textBufs.Get().(*bytes.Buffer)
		defer textBufs.Put(buf)
		buf.Reset()
		if err := c.WriteTextSelected(buf, sel); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		mfs, err := fast.Gather()
		if err != nil && opts.ErrorLog != nil {
			opts.ErrorLog.Println("gathering self-metrics:", err)
		}
		enc := expfmt.NewEncoder(buf, expfmt.NewFormat(expfmt.TypeTextPlain))
		for _, mf := range mfs {
			if sel.Name(mf.GetName()) {
				enc.Encode(mf)
			}
		}
		h := w.Header()
		h.Set("Content-Type", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
		h.Add("Vary", "Accept-Encoding")
		if opts.DisableCompression || !acceptsGzip(r.Header.Get("Accept-Encoding")) {
			h.Set("Content-Length", strconv.Itoa(buf.Len()))
			w.Write(buf.Bytes())
			return
		}
		h.Set("Content-Encoding", "gzip")
		gz := gzipWriters.Get().(*gzip.Writer)
		defer gzipWriters.Put(gz)
		gz.Reset(w)
		gz.Write(buf.Bytes())
		gz.Close()
	})
}

var (
	textBufs    = sync.Pool{New: func() any { return new(bytes.Buffer) }}
	gzipWriters = sync.Pool{New: func() any {
		gz, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
		return gz
	}}
)

// acceptsGzip reports whether an Accept-Encoding header accepts gzip (with
// a non-zero quality).
func acceptsGzip(header string) bool {
	for _, part := range strings.Split(header, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			continue
		}
		for _, p := range strings.Split(params, ";") {
			if k, v, ok := strings.Cut(strings.TrimSpace(p), "="); ok && strings.TrimSpace(k) == "q" {
				if q, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && q == 0 {
					return false
				}
			}
		}
		return true
	}
	return false
}

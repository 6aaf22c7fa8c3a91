package bridge

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
)

// Handler serves /metrics. The text format and OpenMetrics (what
// Prometheus asks for) go through the fast path, WriteText or
// WriteOpenMetrics followed by fast's families (which must include Self);
// other formats (protobuf), and scrapes that select (name[]=FAMILY, or
// names=PCP subtrees; see Selection) go through client_golang with full,
// which must include the Collector itself (or, for subtrees, the selected
// samples and fast's families). opts mean what they mean to promhttp: MaxRequestsInFlight (503
// beyond), EnableOpenMetrics and AcceptedFormats,
// EnableOpenMetricsTextCreatedSamples (Format.Created), DisableCompression,
// ErrorLog, and Registry, where encoding and gathering errors are counted
// in promhttp's own promhttp_metric_handler_errors_total.
//
// Scrapes that arrive while a fast-path rendering of their format and
// encoding is under way share it (as promhttp's CoalesceGather does), so
// concurrent scrapers cost one read of the sources and one exposition, not
// one each; only a scrape that starts a rendering takes one of
// MaxRequestsInFlight's slots (until its response is sent), those that
// join one add no work. A gzip rendering (at gzip.BestSpeed: a scrape's
// latency matters more than its bytes) compresses as it renders, so the
// uncompressed exposition is never held whole. Responses carry their
// Content-Length; buffers are reused from scrape to scrape. (promhttp has
// no hook for an encoder of its own: its limit, negotiation, compression
// and error counting are followed here, not called.)
func (c *Collector) Handler(fast, full prometheus.Gatherer, opts promhttp.HandlerOpts) http.Handler {
	slow := promhttp.HandlerFor(full, opts) // registers errCnt in opts.Registry
	errCnt := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "promhttp_metric_handler_errors_total",
		Help: "Total number of internal errors encountered by the promhttp metric handler.",
	}, []string{"cause"})
	if opts.Registry != nil {
		if err := opts.Registry.Register(errCnt); err != nil {
			are := &prometheus.AlreadyRegisteredError{}
			if !errors.As(err, are) {
				panic(err)
			}
			errCnt = are.ExistingCollector.(*prometheus.CounterVec)
		}
	}
	accepted := opts.AcceptedFormats
	if len(accepted) == 0 {
		accepted = expfmt.DefaultAcceptedFormats()
		if opts.EnableOpenMetrics {
			accepted = expfmt.DefaultOpenMetricsAcceptedFormats()
		}
	}
	h := &metricsHandler{c: c, fast: fast, slow: slow, opts: opts, accepted: accepted}
	if opts.MaxRequestsInFlight > 0 {
		h.inFlight = make(chan struct{}, opts.MaxRequestsInFlight)
	}
	logf := func(format string, args ...any) {
		if opts.ErrorLog != nil {
			opts.ErrorLog.Println(fmt.Sprintf(format, args...))
		}
	}
	spare := &spareBody{}
	for i := range h.renderers {
		h.renderers[i] = &renderer{c: c, fast: fast, format: Format{OpenMetrics: i&1 == 1, Created: opts.EnableOpenMetricsTextCreatedSamples}, gzip: i&2 == 2, spare: spare, errCnt: errCnt, logf: logf}
	}
	return h
}

type metricsHandler struct {
	c        *Collector
	fast     prometheus.Gatherer
	slow     http.Handler
	opts     promhttp.HandlerOpts
	accepted []expfmt.Format
	inFlight chan struct{}
	// renderers by format (text, OpenMetrics) + 2 * gzip
	renderers [4]*renderer
}

func (h *metricsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ct := expfmt.NegotiateAccept(r.Header, h.accepted...)
	i := 0
	switch ct.FormatType() {
	case expfmt.TypeTextPlain:
	case expfmt.TypeOpenMetrics:
		i = 1
	default:
		i = -1
	}
	var sel *Selection
	if r.URL != nil {
		sel = SelectionFrom(r.URL.Query())
	}
	if sel.Subtrees() {
		// promhttp applies name[] itself
		promhttp.HandlerFor(prometheus.Gatherers{samplesGatherer{h.c, sel}, h.fast}, h.opts).ServeHTTP(w, r)
		return
	}
	if i < 0 || sel != nil {
		h.slow.ServeHTTP(w, r)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", string(ct))
	hd.Add("Vary", "Accept")
	if !h.opts.DisableCompression {
		hd.Add("Vary", "Accept-Encoding")
		if acceptsGzip(r.Header.Get("Accept-Encoding")) {
			hd.Set("Content-Encoding", "gzip")
			i += 2
		}
	}
	rd := h.renderers[i]
	out, leader := rd.get(h.inFlight)
	if out == nil {
		hd.Del("Content-Encoding")
		http.Error(w, fmt.Sprintf("Limit of concurrent requests reached (%d), try again later.", h.opts.MaxRequestsInFlight), http.StatusServiceUnavailable)
		return
	}
	if leader && h.inFlight != nil {
		defer func() { <-h.inFlight }()
	}
	defer rd.release(out)
	hd.Set("Content-Length", strconv.Itoa(len(out.body)))
	w.Write(out.body)
}

// renderer coalesces the fast-path scrapes of one format and encoding. A
// gzip renderer compresses as it renders (at gzip.BestSpeed: a scrape's
// latency matters more than its bytes), so that the uncompressed
// exposition is never held whole.
type renderer struct {
	c      *Collector
	fast   prometheus.Gatherer
	format Format
	gzip   bool
	spare  *spareBody
	errCnt *prometheus.CounterVec
	logf   func(string, ...any)

	mu      sync.Mutex
	pending *rendering // being rendered: scrapes arriving now share it
	size    int        // the length of the last rendering
}

// spareBody keeps the buffer of the last uncompressed rendering released
// (one for all renderers, so that memory stays bounded by the renderings
// in use).
type spareBody struct {
	mu sync.Mutex
	b  []byte
}

// get returns a buffer with room for size bytes.
func (s *spareBody) get(size int) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cap(s.b) >= size {
		b := s.b[:0]
		s.b = nil
		return b
	}
	return make([]byte, 0, size)
}

// put keeps b if it is larger than the one kept.
func (s *spareBody) put(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cap(b) > cap(s.b) {
		s.b = b
	}
}

// rendering is one exposition, shared by the scrapes that asked for it
// while it was rendered.
type rendering struct {
	ready chan struct{}
	body  []byte
	zbuf  *bytes.Buffer // the body's buffer when gzipped
	refs  int           // protected by renderer.mu
}

// gzipChunk is how much uncompressed exposition a gzip rendering holds
// before compressing it.
const gzipChunk = 256 << 10

// get returns the rendering under way, or renders a new one (leader),
// which takes a slot of inFlight (nil: no limit): nil when none is free.
func (rd *renderer) get(inFlight chan struct{}) (p *rendering, leader bool) {
	rd.mu.Lock()
	if p := rd.pending; p != nil {
		p.refs++
		rd.mu.Unlock()
		<-p.ready
		return p, false
	}
	if inFlight != nil {
		select {
		case inFlight <- struct{}{}:
		default:
			rd.mu.Unlock()
			return nil, false
		}
	}
	p = &rendering{ready: make(chan struct{}), refs: 1}
	rd.pending = p
	size := rd.size + rd.size/8
	rd.mu.Unlock()
	defer func() {
		rd.mu.Lock()
		rd.pending = nil
		rd.size = len(p.body)
		rd.mu.Unlock()
		close(p.ready)
	}()

	var out io.Writer
	var gz *gzip.Writer
	var zbuf *bytes.Buffer
	var b []byte
	if rd.gzip {
		zbuf = gzBufs.Get().(*bytes.Buffer)
		zbuf.Reset()
		p.zbuf = zbuf
		gz = gzipWriters.Get().(*gzip.Writer)
		defer gzipWriters.Put(gz)
		gz.Reset(zbuf)
		out = gz
		chunk := chunks.Get().(*[]byte)
		defer chunks.Put(chunk)
		b = rd.c.AppendExposition((*chunk)[:0], rd.format, gzipChunk, func(b []byte) []byte {
			gz.Write(b)
			return b[:0]
		})
		gz.Write(b)
		*chunk = b[:0]
	} else {
		zbuf = bytes.NewBuffer(rd.c.AppendExposition(rd.spare.get(size), rd.format, 0, nil))
		out = zbuf
	}
	rd.appendSelf(out)
	if gz != nil {
		gz.Close()
	}
	p.body = zbuf.Bytes()
	return p, true
}

// appendSelf writes fast's families (the self-metrics) and, in
// OpenMetrics, "# EOF"; errors are counted and logged.
func (rd *renderer) appendSelf(w io.Writer) {
	mfs, err := rd.fast.Gather()
	if err != nil {
		rd.errCnt.WithLabelValues("gathering").Inc()
		rd.logf("error gathering self-metrics: %v", err)
	}
	format := expfmt.NewFormat(expfmt.TypeTextPlain)
	if rd.format.OpenMetrics {
		format = expfmt.NewFormat(expfmt.TypeOpenMetrics)
	}
	enc := expfmt.NewEncoder(w, format)
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			rd.errCnt.WithLabelValues("encoding").Inc()
			rd.logf("error encoding metric family %s: %v", mf.GetName(), err)
		}
	}
	if cl, ok := enc.(expfmt.Closer); ok {
		if err := cl.Close(); err != nil { // OpenMetrics' "# EOF"
			rd.errCnt.WithLabelValues("encoding").Inc()
			rd.logf("error ending the exposition: %v", err)
		}
	}
}

// release drops one scrape's hold on p; the last one keeps its buffer.
func (rd *renderer) release(p *rendering) {
	rd.mu.Lock()
	p.refs--
	last := p.refs == 0
	rd.mu.Unlock()
	if !last {
		return
	}
	if p.zbuf != nil {
		gzBufs.Put(p.zbuf)
	} else {
		rd.spare.put(p.body)
	}
}

var (
	gzipWriters = sync.Pool{New: func() any {
		gz, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
		return gz
	}}
	chunks = sync.Pool{New: func() any { b := make([]byte, 0, gzipChunk+gzipChunk/4); return &b }}
	gzBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}
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

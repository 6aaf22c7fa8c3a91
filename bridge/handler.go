package bridge

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/gzip"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
)

// Handler serves /metrics. The text format and OpenMetrics (what
// Prometheus asks for) go through the fast path, WriteText or
// WriteOpenMetrics followed by fast's families (which must include Self);
// other formats (protobuf), and scrapes selecting families with name[],
// go through client_golang with full, which must include the Collector
// itself. opts mean what they mean to promhttp: MaxRequestsInFlight (503
// beyond), EnableOpenMetrics and AcceptedFormats, DisableCompression,
// ErrorLog, and Registry, where encoding and gathering errors are counted
// in promhttp's own promhttp_metric_handler_errors_total.
//
// Scrapes that arrive while a fast-path rendering of their format is under
// way share it (as promhttp's CoalesceGather does), so concurrent scrapers
// cost one read of the sources and one rendered exposition, not one each;
// only a scrape that starts a rendering takes one of MaxRequestsInFlight's
// slots (until its response is sent), those that join one add no work. A
// gzipped exposition (at
// gzip.BestSpeed: a scrape's latency matters more than its bytes) is
// compressed once for all who accept gzip. An uncompressed response
// carries its Content-Length. Buffers are reused from scrape to scrape.
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
	h := &metricsHandler{slow: slow, opts: opts, accepted: accepted}
	if opts.MaxRequestsInFlight > 0 {
		h.inFlight = make(chan struct{}, opts.MaxRequestsInFlight)
	}
	logf := func(format string, args ...any) {
		if opts.ErrorLog != nil {
			opts.ErrorLog.Println(fmt.Sprintf(format, args...))
		}
	}
	h.renderers = [2]*renderer{
		{c: c, fast: fast, errCnt: errCnt, logf: logf},
		{c: c, fast: fast, om: true, errCnt: errCnt, logf: logf},
	}
	return h
}

type metricsHandler struct {
	slow      http.Handler
	opts      promhttp.HandlerOpts
	accepted  []expfmt.Format
	inFlight  chan struct{}
	renderers [2]*renderer // text, OpenMetrics
}

func (h *metricsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ct := expfmt.NegotiateAccept(r.Header, h.accepted...)
	var rd *renderer
	switch ct.FormatType() {
	case expfmt.TypeTextPlain:
		rd = h.renderers[0]
	case expfmt.TypeOpenMetrics:
		rd = h.renderers[1]
	}
	if rd == nil || (r.URL != nil && r.URL.Query().Has("name[]")) {
		h.slow.ServeHTTP(w, r)
		return
	}
	out, leader := rd.get(h.inFlight)
	if out == nil {
		http.Error(w, fmt.Sprintf("Limit of concurrent requests reached (%d), try again later.", h.opts.MaxRequestsInFlight), http.StatusServiceUnavailable)
		return
	}
	if leader && h.inFlight != nil {
		defer func() { <-h.inFlight }()
	}
	defer rd.release(out)
	if out.err != nil {
		http.Error(w, "An error has occurred while serving metrics:\n\n"+out.err.Error(), http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", string(ct))
	hd.Add("Vary", "Accept")
	body := out.body
	if !h.opts.DisableCompression {
		hd.Add("Vary", "Accept-Encoding")
		if acceptsGzip(r.Header.Get("Accept-Encoding")) {
			hd.Set("Content-Encoding", "gzip")
			body = out.gzipped()
		}
	}
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	w.Write(body)
}

// renderer coalesces the fast-path scrapes of one format.
type renderer struct {
	c      *Collector
	fast   prometheus.Gatherer
	om     bool
	errCnt *prometheus.CounterVec
	logf   func(string, ...any)

	mu      sync.Mutex
	pending *rendering // being rendered: scrapes arriving now share it
}

// rendering is one exposition, shared by the scrapes that asked for it
// while it was rendered.
type rendering struct {
	ready  chan struct{}
	body   []byte
	err    error
	gzOnce sync.Once
	gz     *bytes.Buffer
	refs   int // protected by renderer.mu
}

// bodies recycles the renderings' buffers; bodySize is the size of the
// last one, so a new buffer starts large enough.
var (
	bodies   sync.Pool
	bodySize atomic.Int64
)

func newBody() []byte {
	if b, ok := bodies.Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return make([]byte, 0, bodySize.Load()+bodySize.Load()/8)
}

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
	rd.mu.Unlock()
	defer func() {
		rd.mu.Lock()
		rd.pending = nil
		rd.mu.Unlock()
		close(p.ready)
	}()
	buf := bytes.NewBuffer(rd.c.AppendExposition(newBody(), rd.om))
	mfs, err := rd.fast.Gather()
	if err != nil {
		rd.errCnt.WithLabelValues("gathering").Inc()
		rd.logf("error gathering self-metrics: %v", err)
	}
	format := expfmt.NewFormat(expfmt.TypeTextPlain)
	if rd.om {
		format = expfmt.NewFormat(expfmt.TypeOpenMetrics)
	}
	enc := expfmt.NewEncoder(buf, format)
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
	p.body = buf.Bytes()
	bodySize.Store(int64(len(p.body)))
	return p, true
}

// release drops one scrape's hold on p; the last one recycles its buffers.
func (rd *renderer) release(p *rendering) {
	rd.mu.Lock()
	p.refs--
	last := p.refs == 0
	rd.mu.Unlock()
	if last {
		bodies.Put(&p.body)
		if p.gz != nil {
			gzBufs.Put(p.gz)
		}
	}
}

var gzBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// gzipped returns the body compressed, compressing it once.
func (p *rendering) gzipped() []byte {
	p.gzOnce.Do(func() {
		p.gz = gzBufs.Get().(*bytes.Buffer)
		p.gz.Reset()
		gz := gzipWriters.Get().(*gzip.Writer)
		gz.Reset(p.gz)
		gz.Write(p.body)
		gz.Close()
		gzipWriters.Put(gz)
	})
	return p.gz.Bytes()
}

var gzipWriters = sync.Pool{New: func() any {
	gz, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return gz
}}

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

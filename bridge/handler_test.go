package bridge

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	stdlog "log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/pcp-exporter/pcp-exporter/source/mmv"
)

// TestHandler serves a real MMV file through Handler and checks the
// content negotiation: text with its Content-Length, gzip when accepted
// (and not disabled), the same text once decompressed, OpenMetrics through
// client_golang.
func TestHandler(t *testing.T) {
	dir := t.TempDir()
	w := writeInsts(t, dir, "alpha", "beta")
	defer w.Close()
	d, err := mmv.OpenDir(dir, mmv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	c := New(mapper(t, 0), nil, Source{Name: "mmv", Src: d})
	full := prometheus.NewRegistry()
	full.MustRegister(c)
	var want bytes.Buffer
	if err := c.WriteText(&want); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(want.String(), `mmv_app_queue{instname="alpha"} 10`) {
		t.Fatalf("unexpected text:\n%s", want.String())
	}
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	for _, tc := range []struct {
		name, accept, encoding string
		disable, gzipped       bool
	}{
		{name: "plain"},
		{name: "gzip", encoding: "gzip", gzipped: true},
		{name: "gzip among others", encoding: "br, gzip;q=0.5, identity", gzipped: true},
		{name: "gzip refused", encoding: "gzip;q=0"},
		{name: "other codings only", encoding: "br, zstd"},
		{name: "compression disabled", encoding: "gzip", disable: true},
		{name: "openmetrics", accept: "application/openmetrics-text;version=1.0.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(c.Handler(prometheus.NewRegistry(), full, promhttp.HandlerOpts{DisableCompression: tc.disable, EnableOpenMetrics: true}))
			defer srv.Close()
			req, _ := http.NewRequest("GET", srv.URL, nil)
			if tc.accept != "" {
				req.Header.Set("Accept", tc.accept)
			}
			if tc.encoding != "" {
				req.Header.Set("Accept-Encoding", tc.encoding)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 {
				t.Fatalf("status %s: %s", resp.Status, raw)
			}
			if tc.accept != "" {
				if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text") {
					t.Errorf("Content-Type %q", ct)
				}
				if !bytes.HasSuffix(raw, []byte("# EOF\n")) || !bytes.Contains(raw, []byte(`mmv_app_queue{instname="alpha"} 10`)) {
					t.Errorf("OpenMetrics body:\n%s", raw)
				}
				return
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
				t.Errorf("Content-Type %q", ct)
			}
			body := raw
			if tc.gzipped {
				if ce := resp.Header.Get("Content-Encoding"); ce != "gzip" {
					t.Fatalf("Content-Encoding %q, want gzip", ce)
				}
				zr, err := gzip.NewReader(bytes.NewReader(raw))
				if err != nil {
					t.Fatal(err)
				}
				if body, err = io.ReadAll(zr); err != nil {
					t.Fatal(err)
				}
			} else {
				if ce := resp.Header.Get("Content-Encoding"); ce != "" {
					t.Fatalf("Content-Encoding %q, want none", ce)
				}
				if cl := resp.Header.Get("Content-Length"); cl != strconv.Itoa(len(raw)) {
					t.Errorf("Content-Length %q for %d bytes", cl, len(raw))
				}
			}
			if !bytes.Equal(body, want.Bytes()) {
				t.Errorf("body:\n%s\nwant:\n%s", body, want.Bytes())
			}
		})
	}
}

// prometheusAccept is the Accept header Prometheus 2.x and 3.x send.
const prometheusAccept = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"

// TestHandlerOpenMetrics scrapes as Prometheus does (its Accept header,
// gzip): OpenMetrics from the fast path, self-metrics included, read to the
// end by Prometheus's own parser; protobuf and name[] go through
// client_golang.
func TestHandlerOpenMetrics(t *testing.T) {
	dir := t.TempDir()
	w := writeInsts(t, dir, "alpha", "beta")
	defer w.Close()
	d, err := mmv.OpenDir(dir, mmv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	c := New(mapper(t, 0), nil, Source{Name: "mmv", Src: d})
	reg := prometheus.NewRegistry()
	reg.MustRegister(c.Self())
	srv := httptest.NewServer(c.Handler(reg, c.WithSamples(reg), promhttp.HandlerOpts{EnableOpenMetrics: true, Registry: reg}))
	defer srv.Close()
	get := func(accept, query string) (*http.Response, []byte) {
		req, _ := http.NewRequest("GET", srv.URL+query, nil)
		req.Header.Set("Accept", accept)
		resp, err := http.DefaultClient.Do(req) // asks for gzip and decompresses
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%v %s: %s", err, resp.Status, b)
		}
		return resp, b
	}
	resp, body := get(prometheusAccept, "")
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text; version=1.0.0") {
		t.Errorf("Content-Type %q", ct)
	}
	if !resp.Uncompressed {
		t.Error("not gzipped")
	}
	if n := parseOpenMetrics(t, body); n < 4 {
		t.Errorf("%d samples", n)
	}
	for _, want := range []string{"# TYPE mmv_app_queue gauge\n", `mmv_app_queue{instname="alpha"} 10.0` + "\n", "pcp_exporter_source_up{reason=\"\",source=\"mmv\"} 1.0\n"} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("missing %q in:\n%s", want, body)
		}
	}
	if !bytes.HasSuffix(body, []byte("\n# EOF\n")) || bytes.Count(body, []byte("# EOF")) != 1 {
		t.Errorf("not ended by one # EOF:\n%s", body)
	}
	resp, body = get("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited", "")
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/vnd.google.protobuf") || len(body) == 0 {
		t.Errorf("protobuf: Content-Type %q, %d bytes", ct, len(body))
	}
	_, body = get(prometheusAccept, "?name[]=pcp_exporter_source_up")
	if !bytes.Contains(body, []byte("pcp_exporter_source_up")) || bytes.Contains(body, []byte("mmv_app_queue")) {
		t.Errorf("name[] not applied:\n%s", body)
	}
}

// TestHandlerCoalesces: scrapes that arrive while a rendering is under way
// share it (one read of the sources for all) without taking a slot of
// MaxRequestsInFlight; a scrape that needs another rendering beyond the
// limit gets 503.
func TestHandlerCoalesces(t *testing.T) {
	dir := t.TempDir()
	w := writeInsts(t, dir, "alpha", "beta")
	defer w.Close()
	d, err := mmv.OpenDir(dir, mmv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	c := New(mapper(t, 0), nil, Source{Name: "mmv", Src: d})
	const n = 8
	h := c.Handler(prometheus.NewRegistry(), prometheus.NewRegistry(), promhttp.HandlerOpts{EnableOpenMetrics: true, MaxRequestsInFlight: 1}).(*metricsHandler)
	srv := httptest.NewServer(h)
	defer srv.Close()
	scrape := func(accept string) (int, []byte) {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		req.Header.Set("Accept", accept)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	c.mu.Lock() // a rendering that cannot finish yet
	reads := c.reads
	bodies := make(chan []byte, n)
	for i := 0; i < n; i++ {
		go func() {
			code, b := scrape(prometheusAccept)
			if code != 200 {
				t.Errorf("status %d", code)
			}
			bodies <- b
		}()
	}
	rd := h.renderers[3] // OpenMetrics, gzip (http.Client asks for it)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		rd.mu.Lock()
		refs := 0
		if rd.pending != nil {
			refs = rd.pending.refs
		}
		rd.mu.Unlock()
		if refs == n {
			break
		}
		if time.Now().After(deadline) {
			c.mu.Unlock()
			t.Fatalf("%d of %d scrapes joined the rendering", refs, n)
		}
	}
	if code, _ := scrape("text/plain"); code != http.StatusServiceUnavailable {
		t.Errorf("text scrape beyond the limit: status %d, want 503", code)
	}
	c.mu.Unlock()
	first := <-bodies
	for i := 1; i < n; i++ {
		if b := <-bodies; !bytes.Equal(b, first) {
			t.Errorf("scrapes of one rendering differ:\n%s\n%s", first, b)
		}
	}
	if !bytes.Contains(first, []byte(`mmv_app_queue{instname="alpha"} 10.0`)) {
		t.Errorf("body:\n%s", first)
	}
	if got := c.reads - reads; got != 1 {
		t.Errorf("%d scrapes read the sources %d times, want once", n, got)
	}
	if code, _ := scrape("text/plain"); code != 200 {
		t.Errorf("text scrape once the slot is free: status %d", code)
	}
}

// TestHandlerCountsErrors: a self-metric family that cannot be encoded and
// a gatherer error are counted in promhttp's own
// promhttp_metric_handler_errors_total and logged; the samples are served.
func TestHandlerCountsErrors(t *testing.T) {
	dir := t.TempDir()
	w := writeInsts(t, dir, "alpha", "beta")
	defer w.Close()
	d, err := mmv.OpenDir(dir, mmv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	c := New(mapper(t, 0), nil, Source{Name: "mmv", Src: d})
	reg := prometheus.NewRegistry()
	bad := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		return []*dto.MetricFamily{{Type: dto.MetricType_GAUGE.Enum()}}, errors.New("self-metrics broke")
	})
	var log bytes.Buffer
	h := c.Handler(bad, reg, promhttp.HandlerOpts{EnableOpenMetrics: true, Registry: reg, ErrorLog: stdlog.New(&log, "", 0)})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `mmv_app_queue{instname="alpha"} 10`) {
		t.Fatalf("status %d:\n%s", rec.Code, rec.Body.String())
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() == "promhttp_metric_handler_errors_total" {
			for _, m := range mf.Metric {
				got[m.Label[0].GetValue()] = m.Counter.GetValue()
			}
		}
	}
	if got["encoding"] != 1 || got["gathering"] != 1 {
		t.Errorf("errors counted %v, want encoding 1, gathering 1", got)
	}
	for _, want := range []string{"self-metrics broke", "error encoding metric family"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, log.String())
		}
	}
}

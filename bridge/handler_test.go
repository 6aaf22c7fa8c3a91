package bridge

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

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

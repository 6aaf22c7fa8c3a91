package bridge

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source/mmv"
	"github.com/pcp-exporter/pcp-exporter/source/mmv/mmvwrite"
)

// TestHandlerGzipLarge: a gzip exposition of several chunks (compressed
// as they are rendered) decompresses to the samples the fast path writes,
// followed by the self-metrics and "# EOF", with its Content-Length; a
// scraper that reads nothing of its response holds up neither the
// rendering nor the next scrape.
func TestHandlerGzipLarge(t *testing.T) {
	dir := t.TempDir()
	const n = 12000
	insts := make([]mmvwrite.InstanceDef, n)
	for i := range insts {
		insts[i] = mmvwrite.InstanceDef{ID: int32(i + 1), Name: fmt.Sprintf("instance-%05d-with-a-name-as-long-as-a-path", i)}
	}
	var metrics []mmvwrite.MetricDef
	for i := range 4 {
		metrics = append(metrics, mmvwrite.MetricDef{Name: fmt.Sprintf("m%d", i), Item: uint32(i + 1), Type: mmvwrite.TypeU64, Sem: semantics.SemInstant, InDom: 1, Help: "a metric"})
	}
	w, err := mmvwrite.New(filepath.Join(dir, "app"), mmvwrite.Config{InDoms: []mmvwrite.InDomDef{{Serial: 1, Instances: insts}}, Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, m := range metrics {
		for i, in := range insts {
			w.MustHandle(m.Name, in.Name).SetUint64(uint64(i * 7))
		}
	}
	d, err := mmv.OpenDir(dir, mmv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	c := New(mapper(t, 0), nil, Source{Name: "mmv", Src: d})
	reg := prometheus.NewRegistry()
	reg.MustRegister(c.Self())
	var samples bytes.Buffer
	if err := c.WriteOpenMetrics(&samples, false); err != nil {
		t.Fatal(err)
	}
	if samples.Len() < 4*gzipChunk {
		t.Fatalf("%d bytes of samples: too few to fill several chunks", samples.Len())
	}
	srv := httptest.NewServer(c.Handler(reg, reg, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	defer srv.Close()
	// a scraper that asks and reads nothing
	stuck, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	fmt.Fprintf(stuck, "GET / HTTP/1.1\r\nHost: x\r\nAccept: %s\r\nAccept-Encoding: gzip\r\n\r\n", prometheusAccept)
	time.Sleep(100 * time.Millisecond)
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}, Timeout: 30 * time.Second}
	for i := range 2 {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		req.Header.Set("Accept", prometheusAccept)
		req.Header.Set("Accept-Encoding", "gzip")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Header.Get("Content-Encoding") != "gzip" || resp.ContentLength <= 0 {
			t.Errorf("scrape %d: Content-Encoding %q, Content-Length %d: want gzip with a length", i, resp.Header.Get("Content-Encoding"), resp.ContentLength)
		}
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(zr)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(body, samples.Bytes()) {
			t.Fatalf("scrape %d: %d bytes, not the %d bytes of samples first", i, len(body), samples.Len())
		}
		rest := body[samples.Len():]
		if !bytes.Contains(rest, []byte("pcp_exporter_source_up{")) || !bytes.HasSuffix(rest, []byte("\n# EOF\n")) {
			t.Errorf("scrape %d: after the samples:\n%s", i, rest)
		}
	}
}

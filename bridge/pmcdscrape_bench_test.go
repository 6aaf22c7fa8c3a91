package bridge

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
	"github.com/pcp-exporter/pcp-exporter/internal/processmetric"
	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/pmcd"
)

// BenchmarkPMCDScrapePrometheus is bench/pmcd/run.sh's ours_tcp row in
// process: every numeric metric of the local pmcd but the MMV ones, over
// TCP, with the pmproxy naming and every default-off subtree turned on (the
// PMIDs libpcp_fetch.py fetches), scraped through /metrics as Prometheus
// 2.42 asks (its Accept header, so OpenMetrics; gzip, decompressed as it
// does) on a loopback HTTP server, with serve's registry (self-metrics, Go
// and process collectors). In turns with each scrape, one bare fetch of
// the same PMIDs (source.Fetch alone: what libpcp's pmFetch does).
// Medians: scrape-ms and fetch-ms (wall), scrape/fetch their ratio, and
// scrape-cpu-ms, fetch-cpu-ms this process's CPU (the exporter's own work,
// without pmcd's and the agents'). -cpuprofile shows where the scrape's
// CPU goes.
func BenchmarkPMCDScrapePrometheus(b *testing.B) {
	e2e.Require(b, "pminfo")
	s, err := pmcd.Open("127.0.0.1", pmcd.Options{Selection: pmcd.Selection{Exclude: []string{"mmv"}}, Timeout: 30 * time.Second, MetadataTimeout: 3 * time.Minute})
	if err != nil {
		if e2e.Mandatory() {
			b.Fatal(err)
		}
		b.Skip(err)
	}
	defer s.Close()
	naming := mapping.NamingPmproxy
	m, err := mapping.New(nil, mapping.Options{Naming: &naming, With: mapping.LeanNames()})
	if err != nil {
		b.Fatal(err)
	}
	col := New(m, nil, Source{Name: "pmcd", Src: s})
	reg := prometheus.NewRegistry()
	reg.MustRegister(col.Self(), collectors.NewGoCollector(), processmetric.New())
	srv := httptest.NewServer(col.Handler(reg, col.WithSamples(reg), promhttp.HandlerOpts{EnableOpenMetrics: true, Registry: reg}))
	defer srv.Close()
	scrape := func() int {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		req.Header.Set("Accept", prometheusAccept)
		req.Header.Set("Accept-Encoding", "gzip")
		req.Header.Set("User-Agent", "Prometheus/2.42.0+ds")
		req.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", "10")
		resp, err := srv.Client().Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "gzip" {
			b.Fatalf("status %d, Content-Encoding %q", resp.StatusCode, resp.Header.Get("Content-Encoding"))
		}
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, zr)
		if err != nil {
			b.Fatal(err)
		}
		return int(n)
	}
	// up, metadata read: the first scrapes wait for it
	deadline := time.Now().Add(3 * time.Minute)
	for source.StatusOf(s, time.Now()).Reason != source.ReasonUp || len(s.Metrics()) == 0 {
		if time.Now().After(deadline) {
			b.Fatal("the local pmcd's source is not up after 3 minutes")
		}
		scrape()
		time.Sleep(100 * time.Millisecond)
	}
	var pmids []semantics.PMID
	for _, md := range s.Metrics() {
		switch md.Desc.Type {
		case semantics.Type32, semantics.TypeU32, semantics.Type64, semantics.TypeU64, semantics.TypeFloat, semantics.TypeDouble:
			pmids = append(pmids, md.Desc.PMID)
		}
	}
	var res source.Result
	size := scrape()
	if err := s.Fetch(time.Now(), pmids, &res); err != nil {
		b.Fatal(err)
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	var sw, fw, sc, fc []time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		fetch := func() {
			t, c := time.Now(), cpu()
			if err := s.Fetch(time.Now(), pmids, &res); err != nil {
				b.Fatal(err)
			}
			fw, fc = append(fw, time.Since(t)), append(fc, cpu()-c)
		}
		if i%2 == 0 {
			fetch()
		}
		t, c := time.Now(), cpu()
		scrape()
		sw, sc = append(sw, time.Since(t)), append(sc, cpu()-c)
		if i%2 == 1 {
			fetch()
		}
	}
	b.StopTimer()
	med := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2]) / 1e6
	}
	b.ReportMetric(med(sw), "scrape-ms")
	b.ReportMetric(med(fw), "fetch-ms")
	b.ReportMetric(med(sw)/med(fw), "scrape/fetch")
	b.ReportMetric(med(sc), "scrape-cpu-ms")
	b.ReportMetric(med(fc), "fetch-cpu-ms")
	b.ReportMetric(float64(len(pmids)), "pmids")
	b.ReportMetric(float64(size), "bytes")
}

// BenchmarkSignature hashes the metric set of the local pmcd (every metric
// but the MMV ones, help and labels included), as every read does to tell
// whether the mapping must be redone; bytes/op is the strings hashed.
func BenchmarkSignature(b *testing.B) {
	e2e.Require(b, "pminfo")
	s, err := pmcd.Open("local:", pmcd.Options{Selection: pmcd.Selection{Exclude: []string{"mmv"}}, Timeout: 30 * time.Second, MetadataTimeout: 3 * time.Minute})
	if err != nil {
		if e2e.Mandatory() {
			b.Fatal(err)
		}
		b.Skip(err)
	}
	defer s.Close()
	ms := s.Metrics()
	n := 0
	for _, m := range ms {
		n += len(m.Name) + len(m.OneLine) + len(m.Help)
		for _, l := range m.Labels {
			n += len(l.Name) + len(l.Value)
		}
	}
	b.SetBytes(int64(n))
	for b.Loop() {
		signature(ms)
	}
	b.ReportMetric(float64(len(ms)), "metrics")
}

package bridge

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source/archive"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
	"github.com/pcp-exporter/pcp-exporter/source/mmv"
	"github.com/pcp-exporter/pcp-exporter/source/mmv/mmvwrite"
)

// query runs an instant query and returns "value" and labels per series.
func query(t *testing.T, base, q string) []promSample {
	var out []promSample
	for _, r := range e2e.PromQuery(t, base, q, time.Time{}) {
		out = append(out, promSample{r.Metric, fmt.Sprint(r.Value[1])})
	}
	return out
}

type promSample struct {
	labels map[string]string
	value  string
}

func metadataType(t *testing.T, base, metric string) string {
	resp, err := http.Get(base + "/api/v1/targets/metadata?metric=" + url.QueryEscape(metric))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Data []struct{ Type string }
	}
	json.NewDecoder(resp.Body).Decode(&r)
	if len(r.Data) == 0 {
		return ""
	}
	return r.Data[0].Type
}

// TestPrometheusScrapesMMVAndArchive serves an MMV file written with
// mmvwrite.Writer and a replay of the seedtables archive to a real Prometheus and
// checks names, labels, converted values and counter types through its API.
func TestPrometheusScrapesMMVAndArchive(t *testing.T) {
	dir := t.TempDir()
	w, err := mmvwrite.New(filepath.Join(dir, "app"), mmvwrite.Config{
		Metrics: []mmvwrite.MetricDef{
			{Name: "requests", Item: 1, Type: mmvwrite.TypeU64, Sem: semantics.SemCounter, Units: semantics.Units{DimCount: 1}, OneLine: "requests served"},
			{Name: "latency", Item: 2, Type: mmvwrite.TypeDouble, Sem: semantics.SemInstant, Units: semantics.Units{DimTime: 1, ScaleTime: 2}, InDom: 1, OneLine: "latency by method"},
			{Name: "sent", Item: 3, Type: mmvwrite.TypeU64, Sem: semantics.SemCounter, Units: semantics.Units{DimSpace: 1, ScaleSpace: 1}, OneLine: "data sent"},
		},
		InDoms: []mmvwrite.InDomDef{{Serial: 1, Instances: []mmvwrite.InstanceDef{{ID: 0, Name: "GET"}, {ID: 1, Name: "POST"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.MustHandle("requests", "").SetUint64(42)
	w.MustHandle("latency", "GET").SetFloat(250)   // ms
	w.MustHandle("latency", "POST").SetFloat(1500) // ms
	w.MustHandle("sent", "").SetUint64(3)          // Kbyte
	d, err := mmv.OpenDir(dir, mmv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()

	a, err := pcplog.Open(filepath.Join(corpus, "archives", "seedtables", "seedtables"))
	if err != nil {
		t.Fatal(err)
	}
	rp, err := archive.NewReplay([]*pcplog.Archive{a}, archive.ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rp.Close()
	at := rp.Start().Add(20 * time.Second) // observation at t=30 s: 1020, 650, 650
	reg := prometheus.NewRegistry()
	reg.MustRegister(New(mapper(t, mapping.NamingDefault), nil,
		Source{Name: "mmv", Src: d},
		Source{Name: "seed", Src: rp, When: func(time.Time) (time.Time, bool) { return at, true }}))
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	defer srv.Close()

	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n  - job_name: pcp\n    static_configs:\n      - targets: [%q]\n", strings.TrimPrefix(srv.URL, "http://"))
	base := e2e.StartPrometheus(t, cfg, "")
	deadline := time.Now().Add(30 * time.Second)
	for len(query(t, base, "mmv_app_requests_total")) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no sample scraped within 30 s")
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, c := range []struct {
		query  string
		labels map[string]string
		value  string
	}{
		{"mmv_app_requests_total", map[string]string{"job": "pcp"}, "42"},
		{`mmv_app_latency_seconds{instname="GET"}`, nil, "0.25"},
		{`mmv_app_latency_seconds{instname="POST"}`, nil, "1.5"},
		{"mmv_app_sent_bytes_total", nil, "3072"},
		{"seed_total", map[string]string{"hostname": "corpus-host"}, "1020"},
		{"seed_instant", nil, "650"},
		{`pcp_exporter_source_up{source="seed"}`, nil, "1"},
	} {
		got := query(t, base, c.query)
		if len(got) != 1 {
			t.Errorf("%s: %d series, want 1: %v", c.query, len(got), got)
			continue
		}
		if got[0].value != c.value {
			t.Errorf("%s = %s, want %s", c.query, got[0].value, c.value)
		}
		for k, v := range c.labels {
			if got[0].labels[k] != v {
				t.Errorf("%s: label %s=%q, want %q (%v)", c.query, k, got[0].labels[k], v, got[0].labels)
			}
		}
	}
	// metadata is by OpenMetrics family name (without _total)
	for metric, want := range map[string]string{"mmv_app_requests": "counter", "mmv_app_latency_seconds": "gauge", "seed": "counter"} {
		if got := metadataType(t, base, metric); got != want {
			t.Errorf("type of %s: %q, want %q", metric, got, want)
		}
	}
}

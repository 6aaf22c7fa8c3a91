package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/bridge"
	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source/archive"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
	"github.com/pcp-exporter/pcp-exporter/source/mmv"
	"github.com/pcp-exporter/pcp-exporter/source/mmv/mmvwrite"
)

// otelcol runs the real OpenTelemetry Collector with an OTLP receiver (gRPC
// and HTTP) and a file exporter; it returns the two endpoints and the file.
func otelcol(t *testing.T) (grpcAddr, httpAddr, out string) {
	bin := e2e.Require(t, "otelcol")[0]
	dir := t.TempDir()
	grpcAddr, httpAddr = e2e.FreeAddr(t), e2e.FreeAddr(t)
	out = filepath.Join(dir, "metrics.json")
	cfg := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
      http:
        endpoint: %s
exporters:
  file:
    path: %s
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    metrics:
      receivers: [otlp]
      exporters: [file]
`, grpcAddr, httpAddr, out)
	cfgPath := filepath.Join(dir, "otelcol.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", cfgPath)
	logb := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = logb, logb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("otelcol log:\n%s", logb.String())
		}
	})
	// wait until the gRPC port listens
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logb.String(), "Everything is ready") {
		if time.Now().After(deadline) {
			t.Fatalf("otelcol did not start:\n%s", logb.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return grpcAddr, httpAddr, out
}

// lockedBuffer is a bytes.Buffer safe for a process writing to it while the
// test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// otlpPoint is one data point of the collector's JSON output.
type otlpPoint struct {
	resource        map[string]string
	scope, scopeVer string
	metric          string
	unit            string
	desc            string
	kind            string // sum or gauge
	monotonic       bool
	temporal        int
	isInt           bool // an int data point (the hostmetrics naming's)
	attrs           map[string]string
	start           int64
	time            int64
	value           float64
}

func readOTLPFile(t *testing.T, path string) []otlpPoint {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	type kv struct {
		Key   string
		Value struct{ StringValue string }
	}
	type dp struct {
		Attributes        []kv
		StartTimeUnixNano string
		TimeUnixNano      string
		AsDouble          float64
		AsInt             *string // an int data point (the hostmetrics naming's)
	}
	var out []otlpPoint
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var req struct {
			ResourceMetrics []struct {
				Resource     struct{ Attributes []kv }
				ScopeMetrics []struct {
					Scope   struct{ Name, Version string }
					Metrics []struct {
						Name, Unit  string
						Description string
						Sum         *struct {
							DataPoints             []dp
							AggregationTemporality int
							IsMonotonic            bool
						}
						Gauge *struct{ DataPoints []dp }
					}
				}
			}
		}
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			continue // a line the collector is still writing: read again later
		}
		for _, rm := range req.ResourceMetrics {
			res := map[string]string{}
			for _, a := range rm.Resource.Attributes {
				res[a.Key] = a.Value.StringValue
			}
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					add := func(kind string, mono bool, temporal int, pts []dp) {
						for _, p := range pts {
							attrs := map[string]string{}
							for _, a := range p.Attributes {
								attrs[a.Key] = a.Value.StringValue
							}
							st, _ := strconv.ParseInt(p.StartTimeUnixNano, 10, 64)
							tm, _ := strconv.ParseInt(p.TimeUnixNano, 10, 64)
							v := p.AsDouble
							if p.AsInt != nil {
								n, _ := strconv.ParseInt(*p.AsInt, 10, 64)
								v = float64(n)
							}
							out = append(out, otlpPoint{resource: res, scope: sm.Scope.Name, scopeVer: sm.Scope.Version, metric: m.Name, unit: m.Unit, desc: m.Description,
								kind: kind, monotonic: mono, temporal: temporal, isInt: p.AsInt != nil, attrs: attrs, start: st, time: tm, value: v})
						}
					}
					if m.Sum != nil {
						add("sum", m.Sum.IsMonotonic, m.Sum.AggregationTemporality, m.Sum.DataPoints)
					}
					if m.Gauge != nil {
						add("gauge", false, 0, m.Gauge.DataPoints)
					}
				}
			}
		}
	}
	return out
}

// TestOTLPPlaintextReceiverWarnsAtOnce: pushing with TLS (no
// --otlp.insecure) to a real Collector whose otlp receiver has no TLS
// settings logs, within a few seconds of the start (not after the first
// interval and its retries), one warning that says to use --otlp.insecure,
// over gRPC and over HTTP alike.
func TestOTLPPlaintextReceiverWarnsAtOnce(t *testing.T) {
	grpcAddr, httpAddr, _ := otelcol(t)
	t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "")
	mapper, err := newMapper("", "default", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := mmv.OpenDir(t.TempDir(), mmv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, c := range []struct{ protocol, endpoint string }{{"grpc", grpcAddr}, {"http/protobuf", httpAddr}} {
		var logb lockedBuffer
		f := &bridge.OTLPConfig{Endpoint: c.endpoint, Protocol: c.protocol, Interval: time.Minute, Timeout: 5 * time.Second}
		start := time.Now()
		stop, err := f.StartPush(context.Background(), slog.New(slog.NewTextHandler(&logb, nil)), nil, bridge.NewOTelProducer(mapper, nil, []bridge.Source{{Name: "mmv", Src: d, Context: mmvContext()}}...))
		if err != nil {
			t.Fatal(err)
		}
		for !strings.Contains(logb.String(), "level=WARN") && time.Since(start) < 5*time.Second {
			time.Sleep(20 * time.Millisecond)
		}
		warned := time.Since(start)
		log := logb.String()
		if !strings.Contains(log, "level=WARN") {
			t.Errorf("%s: no warning within 5 s of the start:\n%s", c.protocol, log)
		} else if !strings.Contains(log, "--otlp.insecure") || !strings.Contains(log, "plaintext") {
			t.Errorf("%s: the warning does not say what to do:\n%s", c.protocol, log)
		}
		t.Logf("%s: warned after %v", c.protocol, warned.Round(time.Millisecond))
		go stop() // its last push fails and retries: not waited for
	}
}

// TestOTLPPushToCollector pushes an mmvwrite.Writer file and an archive replay to
// a real OpenTelemetry Collector over gRPC and over HTTP and checks its file
// output: names, UCUM units, monotonic cumulative sums with their start
// times, gauges, attributes and resource.
func TestOTLPPushToCollector(t *testing.T) {
	t.Parallel()
	grpcAddr, httpAddr, out := otelcol(t)
	dir := t.TempDir()
	w, err := mmvwrite.New(filepath.Join(dir, "app"), mmvwrite.Config{
		Metrics: []mmvwrite.MetricDef{
			{Name: "requests", Item: 1, Type: mmvwrite.TypeU64, Sem: semantics.SemCounter, Units: semantics.Units{DimCount: 1}, OneLine: "requests served"},
			{Name: "latency", Item: 2, Type: mmvwrite.TypeDouble, Sem: semantics.SemInstant, Units: semantics.Units{DimTime: 1, ScaleTime: 2}, InDom: 1},
			{Name: "sent", Item: 3, Type: mmvwrite.TypeU64, Sem: semantics.SemCounter, Units: semantics.Units{DimSpace: 1, ScaleSpace: 1}},
		},
		InDoms: []mmvwrite.InDomDef{{Serial: 1, Instances: []mmvwrite.InstanceDef{{ID: 0, Name: "GET"}, {ID: 1, Name: "POST"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.MustHandle("requests", "").SetUint64(42)
	w.MustHandle("latency", "GET").SetFloat(250)
	w.MustHandle("latency", "POST").SetFloat(1500)
	w.MustHandle("sent", "").SetUint64(3)
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
	at := rp.Start().Add(20 * time.Second)
	mapper, err := newMapper("", "default", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ protocol, endpoint string }{{"grpc", grpcAddr}, {"http/protobuf", "http://" + httpAddr}} {
		f := &bridge.OTLPConfig{Endpoint: c.endpoint, Protocol: c.protocol, Interval: time.Hour, Timeout: 5 * time.Second, Insecure: true}
		srcs := []bridge.Source{{Name: "mmv", Src: d, Context: mmvContext()}, {Name: "seed", Src: rp, When: func(time.Time) (time.Time, bool) { return at, true }}}
		stop, err := f.StartPush(context.Background(), slog.New(slog.DiscardHandler), nil, bridge.NewOTelProducer(mapper, nil, srcs...))
		if err != nil {
			t.Fatal(err)
		}
		stop() // shutdown collects and pushes once
	}
	var pts []otlpPoint
	deadline := time.Now().Add(20 * time.Second)
	for {
		pts = readOTLPFile(t, out)
		n, m := 0, 0
		for _, p := range pts {
			switch p.metric {
			case "mmv.app.requests":
				n++
			case "seed.counter":
				m++
			}
		}
		if (n >= 2 && m >= 2) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	find := func(metric, inst string) []otlpPoint {
		var r []otlpPoint
		for _, p := range pts {
			if p.metric == metric && p.attrs["instname"] == inst {
				r = append(r, p)
			}
		}
		return r
	}
	gen := w.Generation().UnixNano()
	for _, c := range []struct {
		metric, inst, unit, kind string
		value                    float64
		start                    int64 // 0: not checked; -1: none
	}{
		{"mmv.app.requests", "", "{count}", "sum", 42, gen},
		{"mmv.app.sent", "", "By", "sum", 3072, gen},
		{"mmv.app.latency", "GET", "s", "gauge", 0.25, -1},
		{"mmv.app.latency", "POST", "s", "gauge", 1.5, -1},
		{"seed.counter", "", "{count}", "sum", 1020, 0},
		{"seed.instant", "", "{count}", "gauge", 650, -1},
	} {
		got := find(c.metric, c.inst)
		if len(got) != 2 {
			t.Errorf("%s %q: %d points, want one per protocol", c.metric, c.inst, len(got))
			continue
		}
		for _, p := range got {
			if p.unit != c.unit || p.kind != c.kind || p.value != c.value {
				t.Errorf("%s %q: unit %q kind %s value %v, want %q %s %v", c.metric, c.inst, p.unit, p.kind, p.value, c.unit, c.kind, c.value)
			}
			if c.kind == "sum" && (!p.monotonic || p.temporal != 2) {
				t.Errorf("%s: monotonic %v temporality %d, want a monotonic cumulative sum", c.metric, p.monotonic, p.temporal)
			}
			if c.start > 0 && p.start != c.start {
				t.Errorf("%s: start time %d, want the MMV file's generation %d", c.metric, p.start, c.start)
			}
			if c.start == 0 && c.kind == "sum" && (p.start == 0 || p.start > p.time) {
				t.Errorf("%s: start time %d after time %d", c.metric, p.start, p.time)
			}
			host, _ := os.Hostname()
			want := map[string]string{"host.name": host, "service.instance.id": host, "service.name": "app", "pcp.agent": "mmv"}
			if strings.HasPrefix(c.metric, "seed.") {
				want = map[string]string{"host.name": "corpus-host", "service.instance.id": "corpus-host", "service.name": "pcp"}
			}
			if !reflect.DeepEqual(p.resource, want) {
				t.Errorf("%s: resource %v, want %v", c.metric, p.resource, want)
			}
		}
	}
	if p := find("seed.counter", ""); len(p) > 0 {
		if want := at.UnixNano(); p[0].time != want {
			t.Errorf("seed.counter time %d, want the replayed time %d", p[0].time, want)
		}
	}
}

// TestBackfillOTLPToCollector backfills archives by OTLP (gRPC and HTTP)
// into a real OpenTelemetry Collector and finds every recorded value of
// libpcp's records.csv in its output, once, with its original timestamp.
func TestBackfillOTLPToCollector(t *testing.T) {
	t.Parallel()
	grpcAddr, httpAddr, out := otelcol(t)
	want := map[string]int{}
	for _, c := range []struct{ output, rel string }{
		{"otlp-grpc:" + grpcAddr, "seedtables/seedtables"},
		{"otlp-http:http://" + httpAddr, "marks/marks"},
	} {
		f := &backfillFlags{archives: []string{filepath.Join(corpus, "archives", c.rel)}, output: c.output, otlpInsecure: true, naming: "default", quiet: true}
		var stderr bytes.Buffer
		if err := runBackfill(f, &stderr); err != nil {
			t.Fatalf("%s: %v\n%s", c.output, err, stderr.String())
		}
		for _, row := range readCSVRows(t, filepath.Join(corpus, "archives", filepath.Dir(c.rel), "expected", filepath.Base(c.rel)+".records.csv")) {
			if row[7] != "ok" || row[5] == "STRING" {
				continue
			}
			sec, frac, _ := strings.Cut(row[1], ".")
			v, _ := strconv.ParseFloat(row[6], 64)
			want[fmt.Sprintf("%s|%s|%s%s|%g", row[2], row[4], sec, frac[:3], v)]++
		}
	}
	var got map[string]int
	deadline := time.Now().Add(20 * time.Second)
	for {
		got = map[string]int{}
		for _, p := range readOTLPFile(t, out) {
			if p.kind == "gauge" && p.attrs["value"] != "" {
				continue // strings (info gauges)
			}
			got[fmt.Sprintf("%s|%s|%d|%g", p.metric, p.attrs["instname"], p.time/1e6, p.value)]++
		}
		if len(got) >= len(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: %d points in the collector, want %d", k, got[k], n)
		}
	}
	for k := range got {
		if want[k] == 0 {
			t.Errorf("unexpected point %s", k)
		}
	}
}

// TestOTLPPushAndBackfillAgree pushes a replay of the corpus live archive
// and backfills the same archive by OTLP, each into a real collector: every
// metric has the same resource attributes and the same data-point
// attribute sets both ways (one mapping).
func TestOTLPPushAndBackfillAgree(t *testing.T) {
	t.Parallel()
	pushAddr, _, pushOut := otelcol(t)
	backAddr, _, backOut := otelcol(t)
	path := filepath.Join(corpus, "archives", "live", "live")
	a, err := pcplog.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	rp, err := archive.NewReplay([]*pcplog.Archive{a}, archive.ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rp.Close()
	at := rp.Start().Add(90 * time.Second)
	mapper, err := newMapper("", "default", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &bridge.OTLPConfig{Endpoint: pushAddr, Protocol: "grpc", Interval: time.Hour, Timeout: 5 * time.Second, Insecure: true}
	stop, err := f.StartPush(context.Background(), slog.New(slog.DiscardHandler), nil, bridge.NewOTelProducer(mapper, nil, []bridge.Source{{Name: "live", Src: rp, When: func(time.Time) (time.Time, bool) { return at, true }}}...))
	if err != nil {
		t.Fatal(err)
	}
	stop()
	bf := &backfillFlags{archives: []string{path}, output: "otlp-grpc:" + backAddr, otlpInsecure: true, naming: "default", quiet: true}
	var stderr bytes.Buffer
	if err := runBackfill(bf, &stderr); err != nil {
		t.Fatalf("backfill: %v\n%s", err, stderr.String())
	}
	// metric -> resource and attribute sets, as JSON text
	shape := func(out string, min int) (map[string]string, map[string]map[string]bool) {
		deadline := time.Now().Add(20 * time.Second)
		for {
			res, attrs := map[string]string{}, map[string]map[string]bool{}
			pts := readOTLPFile(t, out)
			for _, p := range pts {
				r, _ := json.Marshal(p.resource)
				res[p.metric] = string(r)
				a, _ := json.Marshal(p.attrs)
				if attrs[p.metric] == nil {
					attrs[p.metric] = map[string]bool{}
				}
				attrs[p.metric][string(a)] = true
			}
			if len(res) >= min || time.Now().After(deadline) {
				return res, attrs
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	pres, pattrs := shape(pushOut, 40)
	bres, battrs := shape(backOut, len(pres))
	if len(pres) < 40 {
		t.Fatalf("push: %d metrics", len(pres))
	}
	for m, r := range pres {
		if bres[m] != r {
			t.Errorf("%s: resource %s pushed, %s backfilled", m, r, bres[m])
		}
		for a := range pattrs[m] {
			if !battrs[m][a] {
				t.Errorf("%s: attributes %s pushed, not backfilled (backfilled: %v)", m, a, battrs[m])
			}
		}
	}
	const wantRes = `{"host.id":"3d1219c7c4c5404aaa1f6d2a48adfda4","host.name":"vm","pcp.domainname":"localdomain","pcp.groupid":"0","pcp.userid":"0","service.instance.id":"vm","service.name":"pcp"}`
	if r := pres["kernel.all.load"]; r != wantRes {
		t.Errorf("kernel.all.load resource %s, want %s", r, wantRes)
	}
	if a := pattrs["kernel.all.load"]; !a[`{"instname":"1 minute"}`] || len(a) != 3 {
		t.Errorf("kernel.all.load attributes %v, want one instname each", a)
	}
}

func readCSVRows(t *testing.T, path string) [][]string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return rows[1:]
}

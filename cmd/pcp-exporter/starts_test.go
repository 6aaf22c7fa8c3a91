package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/pcp-exporter/pcp-exporter/bridge"
	"github.com/pcp-exporter/pcp-exporter/source/archive"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

// TestOTLPCounterStartsAgree pushes an archive replay read every 5 s
// through the SDK's OTLP exporter into a real collector, and backfills the
// same archive with --step 5s into another: every counter point has the
// same start time in both, across indoms.reset's reset (at 00:00:40, the
// start then is the sample before: 00:00:35, pmfetch_interp's records) and
// marks.counter's <mark>.
func TestOTLPCounterStartsAgree(t *testing.T) {
	for _, tc := range []struct {
		rel, metric string
		start       int64 // the start after the reset or mark (ns)
	}{
		{"indoms/indoms", "indoms.reset", 1704067235e9},   // records.csv: 8000 at ...235, 50 at ...240
		{"marks/marks", "marks.counter", 1704067250001e6}, // pmdumplog -a: <mark> at 00:00:50.001
	} {
		t.Run(tc.metric, func(t *testing.T) {
			pushAddr, _, pushOut := otelcol(t)
			backAddr, _, backOut := otelcol(t)
			path := filepath.Join(corpus, "archives", tc.rel)
			a, err := pcplog.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			rp, err := archive.NewReplay([]*pcplog.Archive{a}, archive.ReplayOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer rp.Close()
			end, err := rp.End()
			if err != nil {
				t.Fatal(err)
			}
			mapper, err := newMapper("", "default", false, nil)
			if err != nil {
				t.Fatal(err)
			}
			var at time.Time
			producer := bridge.NewOTelProducer(mapper, nil, bridge.Source{Name: tc.rel, Src: rp, When: func(time.Time) (time.Time, bool) { return at, true }})
			reader := sdkmetric.NewManualReader(sdkmetric.WithProducer(producer))
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			defer mp.Shutdown(context.Background())
			exp, err := otlpmetricgrpc.New(context.Background(), otlpmetricgrpc.WithEndpoint(pushAddr), otlpmetricgrpc.WithInsecure())
			if err != nil {
				t.Fatal(err)
			}
			defer exp.Shutdown(context.Background())
			points := 0 // counter points pushed
			for at = rp.Start(); !at.After(end); at = at.Add(5 * time.Second) {
				var rm metricdata.ResourceMetrics
				if err := reader.Collect(context.Background(), &rm); err != nil {
					t.Fatal(err)
				}
				if err := exp.Export(context.Background(), &rm); err != nil {
					t.Fatal(err)
				}
				for _, sm := range rm.ScopeMetrics {
					for _, m := range sm.Metrics {
						if d, ok := m.Data.(metricdata.Sum[float64]); ok && d.IsMonotonic {
							points += len(d.DataPoints)
						}
					}
				}
			}
			bf := &backfillFlags{archives: []string{path}, output: "otlp-grpc:" + backAddr, otlpInsecure: true, naming: "default", quiet: true, step: 5 * time.Second, stepSet: true}
			var stderr bytes.Buffer
			if err := runBackfill(bf, &stderr); err != nil {
				t.Fatalf("backfill: %v\n%s", err, stderr.String())
			}
			// (metric, attributes, time) -> start, of the monotonic sums,
			// once the collector wrote min of them
			starts := func(out string, min int) map[string]int64 {
				deadline := time.Now().Add(20 * time.Second)
				for {
					m := map[string]int64{}
					for _, p := range readOTLPFile(t, out) {
						if p.kind == "sum" && p.monotonic {
							attrs, _ := json.Marshal(p.attrs)
							m[p.metric+" "+string(attrs)+" "+time.Unix(0, p.time).UTC().Format(time.RFC3339Nano)] = p.start
						}
					}
					if len(m) >= min || time.Now().After(deadline) {
						return m
					}
					time.Sleep(200 * time.Millisecond)
				}
			}
			pushed := starts(pushOut, points)
			backfilled := starts(backOut, points)
			if len(pushed) != points || points < 10 {
				t.Fatalf("the collector got %d of the %d counter points pushed", len(pushed), points)
			}
			moved := 0
			for k, s := range pushed {
				b, ok := backfilled[k]
				if !ok {
					t.Errorf("%s: pushed, not backfilled", k)
					continue
				}
				if s != b {
					t.Errorf("%s: start %v pushed, %v backfilled", k, time.Unix(0, s).UTC(), time.Unix(0, b).UTC())
				}
				if s == tc.start && len(k) > len(tc.metric) && k[:len(tc.metric)+1] == tc.metric+" " {
					moved++
				}
			}
			if moved == 0 {
				t.Errorf("no %s point starting at %v (after its reset or mark)", tc.metric, time.Unix(0, tc.start).UTC())
			}
			t.Logf("%d counter points pushed and backfilled, %d of %s starting at %v", len(pushed), moved, tc.metric, time.Unix(0, tc.start).UTC())
		})
	}
}

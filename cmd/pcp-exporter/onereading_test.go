package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pcp-exporter/pcp-exporter/bridge"
	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/source/archive"
)

// oneReadingMapping renames a Kbyte metric (mem.util.used) and a subtree
// by a regular expression (kernel.all.*): the names every output must
// agree on.
const oneReadingMapping = `rename:
  - match: mem.util.used
    name: memory_used
  - match: '/^kernel\.all\.(.*)$/'
    name: "host_$1"
`

// TestOTLPPushBackfillAndScrapeAgree reads the corpus live archive at one
// time three ways, for every naming, under a mapping file with renames:
// the live OTLP push (a replay at that time) and the OTLP backfill (--step,
// --start and --finish at that time), each into a real OpenTelemetry
// Collector, and a scrape of the same Collector the push reads. The push
// and the backfill carry the same points (metric name, unit, kind,
// attributes, resource, start time and value), and the scrape the same
// values per PCP metric, in the scrape's unit (the pmproxy naming's raw
// values, which OpenTelemetry gets converted). On the code before the
// shared reading the backfill sent the PCP name instead of the rename, and
// with --naming pmproxy raw Kbyte values without a unit.
func TestOTLPPushBackfillAndScrapeAgree(t *testing.T) {
	dir := t.TempDir()
	mapFile := filepath.Join(dir, "mapping.yml")
	if err := os.WriteFile(mapFile, []byte(oneReadingMapping), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(corpus, "archives", "live", "live")
	const step = 10 * time.Second
	for _, naming := range mapping.Namings() {
		t.Run(naming.String(), func(t *testing.T) {
			pushAddr, _, pushOut := otelcol(t)
			backAddr, _, backOut := otelcol(t)
			a, err := archive.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			rp, err := archive.NewReplay([]*archive.Archive{a}, archive.ReplayOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer rp.Close()
			at := rp.Start().Truncate(step).Add(9 * step)
			mapper, err := newMapper(mapFile, naming.String(), false, nil)
			if err != nil {
				t.Fatal(err)
			}
			col := bridge.New(mapper, nil, bridge.Source{Name: "live", Src: rp, When: func(time.Time) (time.Time, bool) { return at, true }})
			f := &bridge.OTLPConfig{Endpoint: pushAddr, Protocol: "grpc", Interval: time.Hour, Timeout: 5 * time.Second, Insecure: true}
			stop, err := f.StartPush(context.Background(), slog.New(slog.DiscardHandler), nil, col.OTel())
			if err != nil {
				t.Fatal(err)
			}
			stop() // pushes once
			reg := prometheus.NewRegistry()
			reg.MustRegister(col)
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			when := at.UTC().Format(time.RFC3339Nano)
			bf := &backfillFlags{archives: []string{path}, output: "otlp-grpc:" + backAddr, otlpInsecure: true, naming: naming.String(),
				mapping: mapFile, step: step, stepSet: true, interp: "nearest", start: when, finish: when, quiet: true}
			var stderr bytes.Buffer
			if err := runBackfill(bf, &stderr); err != nil {
				t.Fatalf("backfill: %v\n%s", err, stderr.String())
			}

			// the points by metric and attributes
			points := func(out string, min int) map[string]otlpPoint {
				deadline := time.Now().Add(20 * time.Second)
				for {
					got := map[string]otlpPoint{}
					for _, p := range readOTLPFile(t, out) {
						a, _ := json.Marshal(p.attrs)
						got[p.metric+" "+string(a)] = p
					}
					if len(got) >= min || time.Now().After(deadline) {
						return got
					}
					time.Sleep(200 * time.Millisecond)
				}
			}
			pushed := points(pushOut, 60)
			backfilled := points(backOut, len(pushed))
			if len(pushed) < 60 {
				t.Fatalf("push: %d points", len(pushed))
			}
			for k, p := range pushed {
				b, ok := backfilled[k]
				switch {
				case !ok:
					t.Errorf("%s pushed, not backfilled", k)
				case p.unit != b.unit || p.kind != b.kind || p.monotonic != b.monotonic || p.temporal != b.temporal:
					t.Errorf("%s: pushed unit %q %s monotonic=%v temporality %d, backfilled unit %q %s monotonic=%v temporality %d",
						k, p.unit, p.kind, p.monotonic, p.temporal, b.unit, b.kind, b.monotonic, b.temporal)
				case fmt.Sprint(p.resource) != fmt.Sprint(b.resource):
					t.Errorf("%s: resource %v pushed, %v backfilled", k, p.resource, b.resource)
				case p.value != b.value || p.start != b.start || p.time != b.time:
					t.Errorf("%s: pushed %v (start %d, time %d), backfilled %v (start %d, time %d)", k, p.value, p.start, p.time, b.value, b.start, b.time)
				}
			}
			for k := range backfilled {
				if _, ok := pushed[k]; !ok {
					t.Errorf("%s backfilled, not pushed", k)
				}
			}
			// the renames and the units every naming's OpenTelemetry form has
			if p, ok := pushed[`memory_used {}`]; !ok || p.unit != "By" {
				t.Errorf("memory_used: %+v (found %v), want unit By", p, ok)
			}
			if naming != mapping.NamingNode {
				if _, ok := pushed[`host_load {"instname":"1 minute"}`]; !ok {
					t.Errorf("host_load (kernel.all.load renamed) not pushed")
				}
			}

			// the scrape's values per PCP metric, against the push's in
			// the scrape's unit
			ms := mapper.Wrap(rp).Metrics()
			target := mapper.TargetLabels(ms, nil)
			promFams, _ := mapper.MapSource(ms, target, mapping.NewNamespace(target))
			otelFams, _ := mapper.OTel().MapSource(ms, target, mapping.NewNamespace(target))
			byProm, byOTel := map[string]*mapping.Family{}, map[string]*mapping.Family{}
			for i := range promFams {
				byProm[promFams[i].Name] = &promFams[i]
			}
			for i := range otelFams {
				byOTel[otelFams[i].OTelName] = &otelFams[i]
			}
			scraped, pushedByPCP := map[string][]float64{}, map[string][]float64{}
			scale := map[string]float64{} // push value / scrape value
			for _, mf := range mfs {
				pf := byProm[mf.GetName()]
				if pf == nil {
					continue // self-metrics, target_info
				}
				for _, m := range mf.Metric {
					v := m.GetGauge().GetValue()
					if m.Counter != nil {
						v = m.Counter.GetValue()
					}
					if m.Untyped != nil {
						v = m.Untyped.GetValue()
					}
					scraped[pf.PCPName] = append(scraped[pf.PCPName], v)
				}
			}
			for _, p := range pushed {
				of := byOTel[p.metric]
				if of == nil {
					t.Errorf("pushed %s: no family", p.metric)
					continue
				}
				pushedByPCP[of.PCPName] = append(pushedByPCP[of.PCPName], p.value)
				for i := range promFams {
					if promFams[i].PCPName == of.PCPName {
						scale[of.PCPName] = of.Scale / promFams[i].Scale
					}
				}
			}
			tol := 1e-12 // the scrape divides where libpcp (and the push) multiplies by 1/1000
			if naming == mapping.NamingPmproxy {
				tol = 1e-7 // pmproxy prints FLOAT with 8 digits
			}
			compared := 0
			for pcp, sv := range scraped {
				pv := pushedByPCP[pcp]
				if len(pv) != len(sv) {
					t.Errorf("%s: %d values scraped, %d pushed", pcp, len(sv), len(pv))
					continue
				}
				sort.Float64s(sv)
				sort.Float64s(pv)
				for i := range sv {
					want := sv[i] * scale[pcp]
					if math.Abs(pv[i]-want) > tol*math.Max(1, math.Abs(want)) {
						t.Errorf("%s: pushed %v, scraped %v (x %v)", pcp, pv[i], sv[i], scale[pcp])
					}
				}
				compared += len(sv)
			}
			if compared < 50 {
				t.Errorf("%d scraped values compared", compared)
			}
			for pcp := range pushedByPCP {
				if _, ok := scraped[pcp]; !ok && naming != mapping.NamingPmproxy {
					t.Errorf("%s pushed, not scraped", pcp)
				}
			}
		})
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pcp-exporter/pcp-exporter/bridge"
	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source/archive"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
	"github.com/pcp-exporter/pcp-exporter/source/mmv/mmvwrite"
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
	t.Parallel()
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
			a, err := pcplog.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			rp, err := archive.NewReplay([]*pcplog.Archive{a}, archive.ReplayOptions{})
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
			if !naming.Computed() { // the node and hostmetrics namings compute their own names
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
			tol := 0.0 // the scrape and the push convert alike (libpcp's pmConvScale)
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

// countingProxy forwards TCP connections to target and counts them.
func countingProxy(t *testing.T, target string) (addr string, accepted *atomic.Int64) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	accepted = &atomic.Int64{}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer c.Close()
				u, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer u.Close()
				go io.Copy(u, c)
				io.Copy(c, u)
			}()
		}
	}()
	return l.Addr().String(), accepted
}

// mappings counts a process's mappings of files under dir
// (/proc/PID/maps): an MMV file read is mapped.
func mappings(t *testing.T, pid int, dir string) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, " "+dir+"/") {
			n++
		}
	}
	return n
}

// TestServePushOpensEachSourceOnce runs serve over a pmcd (the local one,
// through a proxy that counts connections) and an MMV directory, then over
// an archive replay, each without and with an OTLP push to a real
// Collector (every 500 ms): with the push, the exporter makes the same
// pmcd connections (one), opens the same replays (one) and holds the same
// MMV mappings (one) as without, and the Collector gets every source's
// metrics, pmcd's and the MMV directory's under one resource (one host).
// The code before the shared reading opened every source a second time for
// the push, and pushed each source as a resource of its own.
func TestServePushOpensEachSourceOnce(t *testing.T) {
	t.Parallel()
	// a private pmcd: another test's MMV file in the system pmcd's
	// directory makes pmcd flag a namespace change, and the metadata read
	// again on a connection of its own would count here
	p := e2e.StartPMCD(t, e2e.PMCDConfig{Agents: e2e.DSOAgents})
	proxy, accepted := countingProxy(t, p.Addr)
	mmvDir := t.TempDir()
	w, err := mmvwrite.New(filepath.Join(mmvDir, "app"), mmvwrite.Config{
		Metrics: []mmvwrite.MetricDef{{Name: "requests", Item: 1, Type: mmvwrite.TypeU64, Sem: semantics.SemCounter, Units: semantics.Units{DimCount: 1}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.MustHandle("requests", "").SetUint64(42)
	archDir, err := filepath.Abs(filepath.Join(corpus, "archives", "live"))
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	type counts struct{ conns, replays, maps int }
	run := func(t *testing.T, grpcAddr, out string, args []string, dir string, push bool, want ...string) counts {
		before := accepted.Load()
		addr := e2e.FreeAddr(t)
		args = append([]string{"serve", "--web.listen-address=" + addr}, args...)
		if push {
			args = append(args, "--otlp.endpoint="+grpcAddr, "--otlp.insecure", "--otlp.interval=500ms")
		}
		log, proc := startExporterProc(t, client, "http://"+addr, args...)
		for i := 0; i < 3; i++ {
			resp, err := client.Get("http://" + addr + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for _, m := range want {
				if !strings.Contains(string(b), strings.ReplaceAll(m, ".", "_")) {
					t.Fatalf("scrape %d lacks %s:\n%s\n%s", i, m, b, log)
				}
			}
		}
		if push {
			deadline := time.Now().Add(20 * time.Second)
			for {
				names := map[string]bool{}
				for _, p := range readOTLPFile(t, out) {
					names[p.metric] = true
				}
				missing := ""
				for _, m := range want {
					if !names[m] {
						missing = m
					}
				}
				if missing == "" {
					// one host: one resource (one target_info through an
					// OTLP-to-Prometheus path), as the scrape's target_info
					res := map[string]bool{}
					for _, p := range readOTLPFile(t, out) {
						for _, m := range want {
							if p.metric == m {
								res[fmt.Sprint(p.resource)] = true
							}
						}
					}
					if len(res) != 1 {
						t.Errorf("%v pushed under %d resources, want 1: %v", want, len(res), res)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s not pushed:\n%s", missing, log)
				}
				time.Sleep(200 * time.Millisecond)
			}
			time.Sleep(time.Second) // two pushes more
		}
		// an archive replay's files are open while its reader is (one
		// more while it reads the runs' ends ahead): its opens are
		// counted by serve's one line per replay opened
		maps := mappings(t, proc.Pid, dir)
		return counts{int(accepted.Load() - before), strings.Count(log.String(), "replaying archives in real time"), maps}
	}
	for _, c := range []struct {
		name string
		args []string
		dir  string
		want []string
	}{
		{"pmcd and MMV", []string{"--pmcd=" + proxy, "--pmcd.metrics=kernel.all.load", "--mmv.dir=" + mmvDir}, mmvDir, []string{"kernel.all.load", "mmv.app.requests"}},
		{"archive", []string{"--archive=" + filepath.Join(archDir, "live"), "--replay.start=+30s"}, archDir, []string{"kernel.all.load"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			grpcAddr, _, out := otelcol(t) // a Collector of its own: the resources of this case only
			alone := run(t, grpcAddr, out, c.args, c.dir, false, c.want...)
			pushed := run(t, grpcAddr, out, c.args, c.dir, true, c.want...)
			t.Logf("without push %+v, with push %+v", alone, pushed)
			if pushed != alone {
				t.Errorf("with an OTLP push: %+v (pmcd connections, replays opened, MMV mappings); without: %+v", pushed, alone)
			}
			if c.dir == mmvDir && (pushed.conns != 1 || pushed.maps == 0) {
				t.Errorf("%d pmcd connections (want 1), %d MMV mappings", pushed.conns, pushed.maps)
			}
			if c.dir == archDir && pushed.replays != 1 {
				t.Errorf("%d replays opened, want 1", pushed.replays)
			}
		})
	}
}

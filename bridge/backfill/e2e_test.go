package backfill

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

const corpus = "../../testdata/pcp-corpus"

// unitFactor converts PCP's units strings (as pminfo prints them) to the
// factor to base units (bytes, seconds, counts), by hand.
var unitFactor = map[string]float64{
	"Kbyte": 1024, "Kbyte / count": 1024, "Kbyte / sec": 1024, "Mbyte": 1 << 20,
	"Mbyte / hour": float64(1<<20) / 3600, "Tbyte": 1 << 40, "byte": 1, "byte / sec": 1,
	"count": 1, "count / sec": 1, "count x 10^-2": 0.01, "count x 10^3": 1000, "hour": 3600,
	"microsec": 1e-6, "millisec": 1e-3, "nanosec": 1e-9, "none": 1, "sec": 1, "sec^2": 1,
}

// pminfoFactors reads the units of every metric from the corpus's
// pminfo -dmTtl answer.
func pminfoFactors(t *testing.T, rel string) map[string]float64 {
	b, err := os.ReadFile(filepath.Join(corpus, "archives", filepath.Dir(rel), "expected", filepath.Base(rel)+".pminfo-dmTtl.txt"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	name := ""
	for _, line := range strings.Split(string(b), "\n") {
		if i := strings.Index(line, " PMID: "); i > 0 && !strings.HasPrefix(line, " ") {
			name = line[:i]
		}
		if i := strings.Index(line, "Units: "); i >= 0 && name != "" {
			u := strings.TrimSpace(line[i+len("Units: "):])
			f, ok := unitFactor[u]
			if !ok {
				t.Fatalf("%s: units %q not in the test's table", name, u)
			}
			out[name] = f
		}
	}
	return out
}

// num formats a value with 12 significant digits: unit conversion may
// round the last bits differently from the test's multiplication.
func num(v float64) string { return strconv.FormatFloat(v, 'g', 12, 64) }

func openArchive(t *testing.T, rel string) *pcplog.Archive {
	a, err := pcplog.Open(filepath.Join(corpus, "archives", rel))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// expectedRaw reads records.csv (libpcp's every-record answer) into
// "promname|instname|ms|value" rows, values scaled to base units.
func expectedRaw(t *testing.T, a *pcplog.Archive, rel string) map[string]bool {
	m, _ := mapping.New(nil, mapping.Options{})
	fams, _ := m.MapAll(a.Metrics(), nil)
	name := map[string]*mapping.Family{}
	for i := range fams {
		name[fams[i].PCPName] = &fams[i]
	}
	f, err := os.Open(filepath.Join(corpus, "archives", filepath.Dir(rel), "expected", filepath.Base(rel)+".records.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	factors := pminfoFactors(t, rel)
	out := map[string]bool{}
	for _, c := range rows[1:] {
		if c[7] != "ok" {
			continue
		}
		fam := name[c[2]]
		if fam == nil {
			continue
		}
		ms := epochMillis(t, c[1])
		v := c[6]
		if fam.Type == mapping.Info {
			out[fmt.Sprintf("%s|%s|%d|1|%s", fam.Name, c[4], ms, v)] = true
			continue
		}
		fv, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("%s: %q", c[2], v)
		}
		k, ok := factors[c[2]]
		if !ok {
			t.Fatalf("%s: no units in pminfo's answer", c[2])
		}
		out[fmt.Sprintf("%s|%s|%d|%s|", fam.Name, c[4], ms, num(fv*k))] = true
		out[fmt.Sprintf("%s||%d|1|", mapping.TargetInfoName, ms)] = true // at every sample time
	}
	return out
}

// storedRaw reads every sample of the given metric names back from a
// Prometheus-compatible query API (a range selector over all time).
func storedRaw(t *testing.T, base string, names []string, at time.Time) map[string]bool {
	out := map[string]bool{}
	for _, n := range names {
		for _, s := range e2e.PromQuery(t, base, fmt.Sprintf("%s[100y]", n), at) {
			for _, p := range s.Values {
				sec, _ := strconv.ParseFloat(fmt.Sprint(p[0]), 64)
				v, err := strconv.ParseFloat(fmt.Sprint(p[1]), 64)
				if err != nil {
					t.Fatalf("value %v", p[1])
				}
				key := fmt.Sprintf("%s|%s|%d|%s|%s", s.Metric["__name__"], s.Metric["instname"], int64(math.Round(sec*1000)), num(v), s.Metric[mapping.InfoValueLabel])
				if out[key] {
					t.Errorf("duplicate sample %s", key)
				}
				out[key] = true
			}
		}
	}
	return out
}

func promNames(t *testing.T, a *pcplog.Archive) []string {
	m, _ := mapping.New(nil, mapping.Options{})
	fams, _ := m.MapAll(a.Metrics(), nil)
	var out []string
	for _, f := range fams {
		out = append(out, f.Name)
	}
	return append(out, mapping.TargetInfoName)
}

func compareSets(t *testing.T, what string, want, got map[string]bool) {
	t.Helper()
	var missing, extra []string
	for k := range want {
		if !got[k] {
			missing = append(missing, k)
		}
	}
	for k := range got {
		if !want[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing)+len(extra) > 0 {
		t.Errorf("%s: %d samples wanted, %d stored; missing %v; extra %v", what, len(want), len(got), head(missing), head(extra))
	}
}

func head(s []string) []string {
	if len(s) > 8 {
		return append(s[:8:8], "...")
	}
	return s
}

var rawArchives = []string{"seedtables/seedtables", "marks/marks", "multivol/multivol", "indoms/indoms", "types/types_v3"}

// TestRawIntoTSDBBlocks backfills corpus archives into TSDB blocks, starts
// a real Prometheus on them and finds every sample of the archive (libpcp's
// records.csv) there, once, with values in base units.
func TestRawIntoTSDBBlocks(t *testing.T) {
	t.Parallel()
	e2e.Require(t, "prometheus")
	for _, rel := range rawArchives {
		t.Run(rel, func(t *testing.T) {
			a := openArchive(t, rel)
			dir := t.TempDir()
			sink := NewTSDBSink(dir, nil)
			st, err := Run(context.Background(), Options{Archives: []*pcplog.Archive{a}}, sink)
			if err != nil {
				t.Fatal(err)
			}
			if err := sink.Close(); err != nil {
				t.Fatal(err)
			}
			if st.Rejected != 0 || st.Written != st.Read {
				t.Fatalf("stats: %+v", st)
			}
			base := e2e.StartPrometheus(t, "global: {}\n", dir)
			want := expectedRaw(t, a, rel)
			got := storedRaw(t, base, promNames(t, a), st.Last.Add(time.Second))
			compareSets(t, rel, want, got)
			if int64(len(want)) != st.Written {
				t.Errorf("written %d, corpus has %d samples", st.Written, len(want))
			}
		})
	}
}

// TestLabelsIntoTSDBBlocks backfills with extra labels (backfill --label)
// into TSDB blocks and reads them back from a real Prometheus: every
// series carries them, and the samples Prometheus holds are exactly those
// written (libpcp's records).
func TestLabelsIntoTSDBBlocks(t *testing.T) {
	t.Parallel()
	e2e.Require(t, "prometheus")
	rel := "indoms/indoms"
	a := openArchive(t, rel)
	dir := t.TempDir()
	sink := NewTSDBSink(dir, nil)
	extra := labelPairs("instance", "host:9100", "job", "pcp")
	st, err := Run(context.Background(), Options{Archives: []*pcplog.Archive{a}, Labels: extra}, sink)
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	base := e2e.StartPrometheus(t, "global: {}\n", dir)
	at := st.Last.Add(time.Second)
	series := 0
	for _, s := range e2e.PromQuery(t, base, `{__name__=~".+"}[100y]`, at) {
		series++
		if s.Metric["job"] != "pcp" || s.Metric["instance"] != "host:9100" {
			t.Errorf("series without the labels: %v", s.Metric)
		}
	}
	if series != st.Series || series == 0 {
		t.Errorf("Prometheus holds %d series, %d written", series, st.Series)
	}
	got := storedRaw(t, base, promNames(t, a), at)
	compareSets(t, rel, expectedRaw(t, a, rel), got)
	if int64(len(got)) != st.Written {
		t.Errorf("written %d, Prometheus holds %d samples", st.Written, len(got))
	}
}

// TestOpenMetricsThroughPromtool writes an OpenMetrics file, has promtool
// turn it into blocks and checks them the same way.
func TestOpenMetricsThroughPromtool(t *testing.T) {
	t.Parallel()
	promtool := e2e.Require(t, "promtool", "prometheus")[0]
	for _, rel := range []string{"seedtables/seedtables", "indoms/indoms", "types/types_v3"} {
		t.Run(rel, func(t *testing.T) {
			a := openArchive(t, rel)
			dir := t.TempDir()
			om := filepath.Join(dir, "data.om")
			f, err := os.Create(om)
			if err != nil {
				t.Fatal(err)
			}
			st, err := WriteOpenMetrics(context.Background(), Options{Archives: []*pcplog.Archive{a}}, f, false)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			blocks := filepath.Join(dir, "blocks")
			if out, err := exec.Command(promtool, "tsdb", "create-blocks-from", "openmetrics", om, blocks).CombinedOutput(); err != nil {
				t.Fatalf("promtool: %v\n%s", err, out)
			}
			base := e2e.StartPrometheus(t, "global: {}\n", blocks)
			compareSets(t, rel, expectedRaw(t, a, rel), storedRaw(t, base, promNames(t, a), st.Last.Add(time.Second)))
		})
	}
}

// TestStepMatchesReplay backfills on a 10 s grid and compares with libpcp's
// interpolated answer on the same grid (PCP 7.2.1, nearest rule).
func TestStepMatchesReplay(t *testing.T) {
	a := openArchive(t, "seedtables/seedtables")
	var got []string
	sink := sinkFunc(func(b []Sample) (int, error) {
		for _, s := range b {
			got = append(got, fmt.Sprintf("%d|%s|%g", s.T, s.Series.Name(), s.V))
		}
		return 0, nil
	})
	if _, err := Run(context.Background(), Options{Archives: []*pcplog.Archive{a}, Step: 10 * time.Second}, sink); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(corpus, "archives/seedtables/expected/seedtables.t10-S0.interp.nearest.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, _ := csv.NewReader(f).ReadAll()
	m, _ := mapping.New(nil, mapping.Options{})
	fams, _ := m.MapAll(a.Metrics(), nil)
	name := map[string]string{}
	for _, f := range fams {
		name[f.PCPName] = f.Name
	}
	var want []string
	for _, c := range rows[1:] {
		if c[7] != "ok" {
			continue
		}
		sec, _ := strconv.ParseFloat(c[1], 64)
		v, _ := strconv.ParseFloat(c[6], 64)
		want = append(want, fmt.Sprintf("%d|%s|%g", int64(math.Round(sec*1000)), name[c[2]], v))
	}
	sort.Strings(want)
	pcp := got[:0]
	for _, g := range got {
		if !strings.Contains(g, "|"+mapping.TargetInfoName+"|") {
			pcp = append(pcp, g)
		}
	}
	got = pcp
	sort.Strings(got)
	if strings.Join(want, "\n") != strings.Join(got, "\n") {
		t.Errorf("step samples differ from libpcp's interpolation:\nwant %v\n got %v", want, got)
	}
}

type sinkFunc func([]Sample) (int, error)

func (f sinkFunc) Write(_ context.Context, b []Sample) (Outcome, error) {
	n, err := f(b)
	if err != nil {
		return Outcome{}, err
	}
	return Outcome{Accepted: len(b) - n}, nil
}
func (f sinkFunc) Close() error { return nil }

const oooConfig = "global: {}\nstorage:\n  tsdb:\n    out_of_order_time_window: 100y\n"

// TestRemoteWriteIntoPrometheus backfills by remote write into a real
// Prometheus (receiver enabled, out-of-order window for 2024 data).
func TestRemoteWriteIntoPrometheus(t *testing.T) {
	t.Parallel()
	base := e2e.StartPrometheus(t, oooConfig, "", "--web.enable-remote-write-receiver")
	for _, rel := range []string{"seedtables/seedtables", "indoms/indoms", "marks/marks"} {
		a := openArchive(t, rel)
		st, err := Run(context.Background(), Options{Archives: []*pcplog.Archive{a}}, NewRemoteWriteSink(base+"/api/v1/write", nil))
		if err != nil {
			t.Fatal(err)
		}
		// one store for three archives: target_info is the same series for
		// the two of corpus-host; the PCP series are compared
		names := promNames(t, a)
		compareSets(t, rel, withoutTargetInfo(expectedRaw(t, a, rel)), storedRaw(t, base, names[:len(names)-1], st.Last.Add(time.Second)))
	}
}

func withoutTargetInfo(m map[string]bool) map[string]bool {
	for k := range m {
		if strings.HasPrefix(k, mapping.TargetInfoName+"|") {
			delete(m, k)
		}
	}
	return m
}

// TestRemoteWriteIntoVictoriaMetrics does the same into VictoriaMetrics,
// twice, as the README advises for reruns (-dedup.minScrapeInterval=1ms):
// the second run stores nothing more.
func TestRemoteWriteIntoVictoriaMetrics(t *testing.T) {
	t.Parallel()
	base := startVictoriaMetrics(t, "-dedup.minScrapeInterval=1ms")
	rel := "indoms/indoms"
	a := openArchive(t, rel)
	want := expectedRaw(t, a, rel)
	for run := 1; run <= 2; run++ {
		st, err := Run(context.Background(), Options{Archives: []*pcplog.Archive{a}}, NewRemoteWriteSink(base+"/api/v1/write", nil))
		if err != nil {
			t.Fatal(err)
		}
		// make the samples searchable
		if resp, err := http.Get(base + "/internal/force_flush"); err == nil {
			resp.Body.Close()
		}
		if st.Written != st.Read {
			t.Errorf("run %d: stats %+v", run, st)
		}
		var got map[string]bool
		for i := 0; i < 50; i++ {
			got = exportedVM(t, base, promNames(t, a))
			if len(got) >= len(want) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		compareSets(t, fmt.Sprintf("%s, run %d", rel, run), want, got)
	}
}

// startVictoriaMetrics runs victoria-metrics on a free loopback port with
// extra flags and returns its base URL once healthy.
func startVictoriaMetrics(t *testing.T, flags ...string) string {
	bin := e2e.Require(t, "victoria-metrics")[0]
	dir := t.TempDir()
	addr := e2e.FreeAddr(t)
	cmd := exec.Command(bin, append([]string{"-httpListenAddr=" + addr, "-storageDataPath=" + dir, "-retentionPeriod=100y", "-search.latencyOffset=0s", "-search.disableCache"}, flags...)...)
	logf, err := os.Create(filepath.Join(t.TempDir(), "vm.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); logf.Close() })
	base := "http://" + addr
	for i := 0; ; i++ {
		if resp, err := http.Get(base + "/health"); err == nil {
			resp.Body.Close()
			return base
		}
		if i > 100 {
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("victoria-metrics not up:\n%s", b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// exportedVM reads raw samples back with VictoriaMetrics' export API.
func exportedVM(t *testing.T, base string, names []string) map[string]bool {
	out := map[string]bool{}
	for _, n := range names {
		resp, err := http.Get(base + "/api/v1/export?" + url.Values{"match[]": {n}}.Encode())
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(resp.Body)
		for {
			var line struct {
				Metric     map[string]string
				Values     []float64
				Timestamps []int64
			}
			if err := dec.Decode(&line); err != nil {
				break
			}
			for i, v := range line.Values {
				key := fmt.Sprintf("%s|%s|%d|%s|%s", line.Metric["__name__"], line.Metric["instname"], line.Timestamps[i], num(v), line.Metric[mapping.InfoValueLabel])
				if out[key] {
					t.Errorf("duplicate sample %s", key)
				}
				out[key] = true
			}
		}
		resp.Body.Close()
	}
	return out
}

// TestRemoteWriteSurvivesReceiverFaults puts a proxy in front of a real
// Prometheus that refuses some requests with 503, forwards one and then
// answers 502 (the receiver has the samples, the client retries), stalls
// one, and refuses the last batch as invalid (400): after the backfill
// every sample but the refused ones is there exactly once, and the counts
// reported are those Prometheus holds.
func TestRemoteWriteSurvivesReceiverFaults(t *testing.T) {
	t.Parallel()
	base := e2e.StartPrometheus(t, oooConfig, "", "--web.enable-remote-write-receiver")
	target, _ := url.Parse(base)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		k := n
		mu.Unlock()
		switch k {
		case 2, 3: // receiver down
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
		case 4: // the receiver stores the samples, then the answer is lost
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			rec := httptest.NewRecorder()
			proxy.ServeHTTP(rec, r)
			http.Error(w, "bad gateway", http.StatusBadGateway)
		case 6: // a stall longer than the client's timeout
			time.Sleep(1500 * time.Millisecond)
			http.Error(w, "late", http.StatusServiceUnavailable)
		case 8: // the last batch refused as invalid
			http.Error(w, "out of order sample", http.StatusBadRequest)
		default:
			proxy.ServeHTTP(w, r)
		}
	}))
	defer srv.Close()
	rel := "live/live"
	a := openArchive(t, rel)
	sink := NewRemoteWriteSink(srv.URL+"/api/v1/write", nil)
	sink.Client.Timeout = time.Second
	sink.MinBackoff = 10 * time.Millisecond
	st, err := Run(context.Background(), Options{Archives: []*pcplog.Archive{a}}, sink)
	if err != nil {
		t.Fatal(err)
	}
	if sink.Retries < 4 {
		t.Errorf("%d retries, want at least 4 (the faults were not exercised: %d requests)", sink.Retries, n)
	}
	if st.Rejected == 0 || st.Rejected >= batchSize || st.RejectedBy["out of order"] != st.Rejected || st.Written != st.Read-st.Rejected {
		t.Errorf("stats %+v (%d requests)", st, n)
	}
	want := expectedRaw(t, a, rel)
	got := storedRaw(t, base, promNames(t, a), st.Last.Add(time.Second))
	if int64(len(got)) != st.Written {
		t.Errorf("%d written, Prometheus holds %d", st.Written, len(got))
	}
	for k := range got {
		if !want[k] {
			t.Errorf("Prometheus holds %s, not in the archive", k)
		}
	}
}

// epochMillis truncates "seconds.fraction" to milliseconds, as Prometheus
// timestamps are.
func epochMillis(t *testing.T, s string) int64 {
	sec, frac, _ := strings.Cut(s, ".")
	frac = (frac + "000")[:3]
	a, err1 := strconv.ParseInt(sec, 10, 64)
	b, err2 := strconv.ParseInt(frac, 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("bad time %q", s)
	}
	return a*1000 + b
}

// TestRawSeveralArchives: archives of different metrics backfilled in one
// run give exactly the samples, under the same series, that each gives
// alone (a series belongs to its family, whatever the other archives hold).
func TestRawSeveralArchives(t *testing.T) {
	rels := []string{"types/types", "indoms/indoms", "live/live"}
	collect := func(as []*pcplog.Archive) map[string]int {
		got := map[string]int{}
		sink := sinkFunc(func(b []Sample) (int, error) {
			for _, s := range b {
				var lb strings.Builder
				for _, l := range s.Series.Labels {
					fmt.Fprintf(&lb, "%s=%q,", l.Name, l.Value)
				}
				got[fmt.Sprintf("%s %d %s", lb.String(), s.T, num(s.V))]++
			}
			return 0, nil
		})
		// full labels: series with the same labels whatever the other
		// archives (lean ones keep hostname when several hosts meet)
		if _, err := Run(context.Background(), Options{Archives: as, Mapper: fullMapper}, sink); err != nil {
			t.Fatal(err)
		}
		return got
	}
	want := map[string]int{}
	var all []*pcplog.Archive
	for _, rel := range rels {
		a := openArchive(t, rel)
		all = append(all, a)
		for k, n := range collect([]*pcplog.Archive{a}) {
			want[k] += n
		}
	}
	got := collect(all)
	if len(want) < 1000 {
		t.Fatalf("only %d samples", len(want))
	}
	var diff []string
	for k, n := range want {
		if got[k] != n {
			diff = append(diff, fmt.Sprintf("want %dx, got %dx: %s", n, got[k], k))
		}
	}
	for k, n := range got {
		if want[k] == 0 {
			diff = append(diff, fmt.Sprintf("extra %dx: %s", n, k))
		}
	}
	sort.Strings(diff)
	if len(diff) > 0 {
		t.Errorf("%d of %d samples differ:\n%s", len(diff), len(want), strings.Join(head(diff), "\n"))
	}
}

var fullMapper = func() *mapping.Mapper {
	full := true
	m, _ := mapping.New(nil, mapping.Options{FullLabels: &full})
	return m
}()

// TestStepLeavesNoGoroutine: a backfill's replay stops its reading
// goroutine when the run ends (the OpenMetrics writer runs one per family).
func TestStepLeavesNoGoroutine(t *testing.T) {
	a := openArchive(t, "live/live")
	before := runtime.NumGoroutine()
	for i := 0; i < 5; i++ {
		if _, err := Run(context.Background(), Options{Archives: []*pcplog.Archive{a}, Step: time.Second}, sinkFunc(func([]Sample) (int, error) { return 0, nil })); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines before five runs, %d after", before, n)
	}
}

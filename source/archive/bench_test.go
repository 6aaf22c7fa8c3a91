package archive

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// benchArchive is the archive the decode benchmark reads: PCPX_BENCH_ARCHIVE
// (e.g. workload W2 recorded by bench/decode/run.sh), else the corpus's live
// recording.
func benchArchive() string {
	if p := os.Getenv("PCPX_BENCH_ARCHIVE"); p != "" {
		return p
	}
	return filepath.Join(corpus, "archives/live/live")
}

func volumeBytes(tb testing.TB, a *Archive) int64 {
	var n int64
	for _, v := range a.state().vols {
		st, err := os.Stat(v.path)
		if err != nil {
			tb.Fatal(err)
		}
		n += st.Size()
	}
	return n
}

// readAllValues reads every record and touches every value.
func readAllValues(tb testing.TB, a *Archive) (recs, vals int) {
	r := a.Records()
	defer r.Close()
	var sink uint64
	for r.Next() {
		rec := r.Record()
		recs++
		for i := range rec.Sets {
			for _, v := range rec.Sets[i].Values {
				sink += v.Value.Bits() + uint64(len(v.Value.Bytes()))
			}
			vals += len(rec.Sets[i].Values)
		}
	}
	if err := r.Err(); err != nil {
		tb.Fatal(err)
	}
	_ = sink
	return recs, vals
}

// BenchmarkDecode reads every value of an archive; it reports MB/s of volume
// data, values/s and allocations per value.
func BenchmarkDecode(b *testing.B) {
	a, err := Open(benchArchive())
	if err != nil {
		b.Fatal(err)
	}
	size := volumeBytes(b, a)
	b.SetBytes(size)
	b.ReportAllocs()
	var vals int
	for b.Loop() {
		_, vals = readAllValues(b, a)
	}
	b.ReportMetric(float64(vals)*float64(b.N)/b.Elapsed().Seconds(), "values/s")
}

// BenchmarkDecodeOnly reads every record of an archive restricted to the
// metrics of the comparison with pmrep (bench/replay/metrics.txt), as a
// replay of them does: the sets of the other metrics are only checked to be
// where the previous record had them (see sameLayout).
func BenchmarkDecodeOnly(b *testing.B) {
	a, err := Open(benchArchive())
	if err != nil {
		b.Fatal(err)
	}
	m4, _ := m4Metrics(b, a)
	want := map[semantics.PMID]bool{}
	for _, p := range m4 {
		want[p] = true
	}
	b.SetBytes(volumeBytes(b, a))
	b.ReportAllocs()
	sets := 0
	for b.Loop() {
		r := a.Records()
		r.Only(func(p semantics.PMID) bool { return want[p] })
		for r.Next() {
			sets += len(r.Record().Sets)
		}
		if err := r.Err(); err != nil {
			b.Fatal(err)
		}
		r.Close()
	}
	b.ReportMetric(float64(sets)/float64(b.N), "sets/op")
}

// TestDecodeAllocations: reading a whole archive allocates a bounded number
// of times (opening volumes, growing reused
// buffers), not per record or value.
func TestDecodeAllocations(t *testing.T) {
	a, err := Open(filepath.Join(corpus, "archives/live/live_v3"))
	if err != nil {
		t.Fatal(err)
	}
	recs, vals := readAllValues(t, a)
	allocs := testing.AllocsPerRun(5, func() { readAllValues(t, a) })
	if allocs > 50 {
		t.Errorf("%v allocations to read %d records with %d values", allocs, recs, vals)
	}
	t.Logf("%d records, %d values: %v allocations", recs, vals, allocs)
}

// m4Metrics returns the archive's metrics of the comparison with pmrep
// (bench/replay/metrics.txt, performance anchor M4; every metric when the
// archive has none of them) and all its metrics.
func m4Metrics(tb testing.TB, a *Archive) (m4, all []semantics.PMID) {
	list, err := os.ReadFile("../../bench/replay/metrics.txt")
	if err != nil {
		tb.Fatal(err)
	}
	want := map[string]bool{}
	for _, n := range strings.Fields(string(list)) {
		want[n] = true
	}
	for _, m := range a.Metrics() {
		all = append(all, m.Desc.PMID)
		if want[m.Name] {
			m4 = append(m4, m.Desc.PMID)
		}
	}
	if len(m4) == 0 {
		m4 = all
	}
	return m4, all
}

// BenchmarkReplay replays an archive at a 1 s step from start to end, as
// `replay --interp prior` does, and reports the values produced per second:
// "m4" over the metrics of the comparison with pmrep
// (bench/replay/metrics.txt, performance anchor M4; every metric when the
// archive has none of them), "all" over every metric (what backfill --step
// replays).
func BenchmarkReplay(b *testing.B) {
	a, err := Open(benchArchive())
	if err != nil {
		b.Fatal(err)
	}
	m4, all := m4Metrics(b, a)
	for _, bc := range []struct {
		name  string
		pmids []semantics.PMID
	}{{"m4", m4}, {"all", all}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var vals int
			for b.Loop() {
				vals = replayAll(b, a, bc.pmids)
			}
			b.ReportMetric(float64(vals)*float64(b.N)/b.Elapsed().Seconds(), "values/s")
		})
	}
}

// BenchmarkReplayCLI is BenchmarkReplay/m4 as `replay --interp prior` of
// the 59 metrics runs it (bench/replay/run.sh): the archive opened for each
// replay and the collector tuned as the command tunes it (GOGC=400 within
// 48 MiB).
func BenchmarkReplayCLI(b *testing.B) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(48 << 20))
	b.ReportAllocs()
	var vals int
	for b.Loop() {
		a, err := Open(benchArchive())
		if err != nil {
			b.Fatal(err)
		}
		m4, _ := m4Metrics(b, a)
		vals = replayAll(b, a, m4)
	}
	b.ReportMetric(float64(vals)*float64(b.N)/b.Elapsed().Seconds(), "values/s")
}

func replayAll(b *testing.B, a *Archive, pmids []semantics.PMID) int {
	rp, err := NewReplay([]*Archive{a}, ReplayOptions{Interp: semantics.InterpPrior})
	if err != nil {
		b.Fatal(err)
	}
	defer rp.Close()
	end, err := rp.End()
	if err != nil {
		b.Fatal(err)
	}
	var res source.Result
	vals := 0
	for t := rp.Start(); !t.After(end); t = t.Add(time.Second) {
		if err := rp.Fetch(t, pmids, &res); err != nil {
			b.Fatal(err)
		}
		for i := range res.Sets {
			vals += len(res.Sets[i].Values)
		}
	}
	return vals
}

// TestOpenAndEndReadLittle: Open checks the first volume's label and End
// reads from the last index entry on; neither allocates a read window for
// the rest of the volume (live.0 is 430 kB; the window is set larger).
func TestOpenAndEndReadLittle(t *testing.T) {
	defer func(n int) { minWindow = n }(minWindow)
	minWindow = 4 << 20
	for _, name := range []string{"live", "live_v3"} {
		path := filepath.Join(corpus, "archives/live", name)
		var a *Archive
		open := allocBytes(func() {
			var err error
			if a, err = Open(path); err != nil {
				t.Fatal(err)
			}
		})
		meta, _ := os.Stat(path + ".meta")
		if limit := 3*meta.Size() + 64<<10; open > limit {
			t.Errorf("%s: Open allocated %d bytes, want at most %d (3 x .meta + 64 KiB)", name, open, limit)
		}
		end := allocBytes(func() {
			if _, err := a.End(); err != nil {
				t.Fatal(err)
			}
		})
		if end > 64<<10 {
			t.Errorf("%s: End allocated %d bytes, want at most 64 KiB", name, end)
		}
		// and the archive still reads whole
		recs, _ := readAllValues(t, a)
		if recs != 208 {
			t.Errorf("%s: %d records, pmdumplog shows 208", name, recs)
		}
		t.Logf("%s: Open %d bytes, End %d bytes; %d records", name, open, end, recs)
	}
}

func allocBytes(f func()) int64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return int64(after.TotalAlloc - before.TotalAlloc)
}

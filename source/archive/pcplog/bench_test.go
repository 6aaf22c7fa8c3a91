package pcplog

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source/archive/internal/archivetest"
)

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
	a, err := Open(archivetest.BenchArchive())
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
	a, err := Open(archivetest.BenchArchive())
	if err != nil {
		b.Fatal(err)
	}
	m4, _ := archivetest.M4Metrics(b, a.Metrics())
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

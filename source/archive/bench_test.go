package archive

import (
	"os"
	"path/filepath"
	"testing"
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

// TestDecodeAllocations: reading a whole archive allocates a bounded number
// of times (opening volumes, growing reused buffers), not per record or value.
func TestDecodeAllocations(t *testing.T) {
	a, err := Open(filepath.Join(corpus, "archives/live/live_v3"))
	if err != nil {
		t.Fatal(err)
	}
	recs, vals := readAllValues(t, a)
	allocs := testing.AllocsPerRun(5, func() { readAllValues(t, a) })
	if allocs > 40 {
		t.Errorf("%v allocations to read %d records with %d values", allocs, recs, vals)
	}
	t.Logf("%d records, %d values: %v allocations", recs, vals, allocs)
}

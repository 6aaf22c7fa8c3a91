package pmcd

import (
	"net"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// BenchmarkDecodeResult decodes a HIGHRES_RESULT of every metric of the
// local pmcd but the per-process ones (testdata/result.pdu), as a steady
// state fetch does: no allocation.
func BenchmarkDecodeResult(b *testing.B) {
	p := readCaptured(b, "result")
	pmids, types := resultPMIDs(p)
	var rd resultDecoder
	var sets []source.ValueSet
	n := 0
	b.ReportAllocs()
	b.SetBytes(int64(len(p.b)))
	for i := 0; i < b.N; i++ {
		rd.reset()
		var err error
		sets, _, err = rd.decode(p, pmids, types, sets[:0])
		if err != nil {
			b.Fatal(err)
		}
		rd.link(sets)
		n = len(rd.vals)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/value")
}

// TestFetchAllocsIndependentOfValues: a steady state fetch allocates the
// same (a constant few, for the deadline) whether it returns 10 values or
// 4000: nothing per value.
func TestFetchAllocsIndependentOfValues(t *testing.T) {
	f := newFake(t)
	s := openFake(t, f)
	allocs := func(n int) float64 {
		pmids := make([]semantics.PMID, n)
		for i := range pmids {
			pmids[i] = fakePMIDs[i%2]
		}
		raw := make([]uint32, n)
		for i, id := range pmids {
			raw[i] = uint32(id)
		}
		reply := goodResult(raw)
		f.setFetch(func(c net.Conn, _ []uint32) bool { c.Write(reply); return true })
		var res source.Result
		s.Fetch(time.Now(), pmids, &res)
		return testing.AllocsPerRun(20, func() {
			if err := s.Fetch(time.Now(), pmids, &res); err != nil || len(res.Sets) != n || res.Sets[n-1].Err != nil {
				t.Fatalf("fetch: %v %+v", err, res.Sets[n-1])
			}
		})
	}
	small, big := allocs(10), allocs(4000)
	if big > small || small > 4 {
		t.Errorf("allocations per fetch: %v for 10 values, %v for 4000", small, big)
	}
	t.Logf("allocations per fetch: %v for 10 values, %v for 4000", small, big)
}

// BenchmarkFetchLocal fetches every metric of the local pmcd but the
// per-process and MMV ones (the PMDAs' own time included).
func BenchmarkFetchLocal(b *testing.B) {
	e2e.Require(b, "pminfo")
	s, err := Open("local:", Options{Selection: Selection{Exclude: []string{"proc", "hotproc", "acct", "mmv", "cgroup"}}})
	if err != nil {
		if e2e.Mandatory() {
			b.Fatal(err)
		}
		b.Skip(err)
	}
	defer s.Close()
	var pmids []semantics.PMID
	for _, m := range s.Metrics() {
		pmids = append(pmids, m.Desc.PMID)
	}
	var res source.Result
	s.Fetch(time.Now(), pmids, &res)
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for i := 0; i < b.N; i++ {
		if err := s.Fetch(time.Now(), pmids, &res); err != nil {
			b.Fatal(err)
		}
		n = 0
		for _, set := range res.Sets {
			n += len(set.Values)
		}
	}
	b.ReportMetric(float64(n), "values/op")
}

// BenchmarkReadMetadata reads the metadata of every metric of the local
// pmcd but the MMV ones again, each on a new connection as a read after a
// change does: all of it (after an agent change), only the labels (after
// a label change alone), and only the namespace with the selected names'
// PMIDs (after a namespace change outside the selection); PDUs/op counts
// the requests sent after the handshake.
func BenchmarkReadMetadata(b *testing.B) {
	e2e.Require(b, "pminfo")
	s, err := Open("local:", Options{Selection: Selection{Exclude: []string{"mmv"}}})
	if err != nil {
		if e2e.Mandatory() {
			b.Fatal(err)
		}
		b.Skip(err)
	}
	defer s.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, bc := range []struct {
		name string
		prev *metadata
		what staleness
	}{{"all", nil, staleAll}, {"labels", s.md, staleLabels}, {"names", s.md, staleNames}} {
		b.Run(bc.name, func(b *testing.B) {
			pdus := 0
			for i := 0; i < b.N; i++ {
				c, err := dial(s.ep, time.Minute, s.opts.MaxPDU)
				if err != nil {
					b.Fatal(err)
				}
				md, _, err := s.load(c, time.Now().Add(time.Minute), bc.prev, bc.what)
				pdus = c.sent
				c.close()
				if err != nil || len(md.metrics) != len(s.md.metrics) {
					b.Fatalf("%v: %d metrics, want %d", err, len(md.metrics), len(s.md.metrics))
				}
			}
			b.ReportMetric(float64(pdus), "PDUs/op")
		})
	}
}

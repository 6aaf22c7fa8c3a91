package derive

import (
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// staticSource serves fixed values for 100 instances, reusing the result's
// buffers, so that benchmarks measure the derived metrics alone.
type staticSource struct{ n uint64 }

func (s *staticSource) Metrics() []source.Metric                    { return fakeMetrics }
func (s *staticSource) Instances(semantics.InDom) []source.Instance { return nil }
func (s *staticSource) Close() error                                { return nil }
func (s *staticSource) Fetch(t time.Time, pmids []semantics.PMID, res *source.Result) error {
	s.n++
	res.Time = t
	if cap(res.Sets) < len(pmids) {
		res.Sets = make([]source.ValueSet, len(pmids))
	}
	res.Sets = res.Sets[:len(pmids)]
	for i, p := range pmids {
		vs := &res.Sets[i]
		vs.PMID = p
		vs.Values = vs.Values[:0]
		for k := int32(0); k < 100; k++ {
			var v semantics.Value
			switch p.Item() {
			case 1:
				v = semantics.Uint64Value(s.n * 10)
			case 2:
				v = semantics.Uint32Value(uint32(s.n) * uint32(k))
			case 3:
				v = semantics.DoubleValue(float64(k))
			default:
				v = semantics.Int32Value(int32(k))
			}
			in := k
			if p.Item() == 1 || p.Item() == 5 {
				in = semantics.InNull
			}
			vs.Values = append(vs.Values, source.InstValue{Inst: in, Value: v})
			if in == semantics.InNull {
				break
			}
		}
	}
	return nil
}

// BenchmarkFetch evaluates four derived metrics over 100 instances per
// fetch; a steady state fetch must not allocate.
func BenchmarkFetch(b *testing.B) {
	var defs []Definition
	for i, e := range []string{"i.kb * 1024 + i.kb", "rate(c.ms)", "avg(i.kb) > 10 ? min(c.ms) : max(c.ms)", `rescale(c.ms, "sec")`} {
		d, err := Define("bench."+itoa(i), e)
		if err != nil {
			b.Fatal(err)
		}
		defs = append(defs, d)
	}
	w, err := Wrap(&staticSource{}, defs, nil)
	if err != nil {
		b.Fatal(err)
	}
	if len(w.Errors()) > 0 {
		b.Fatal(w.Errors())
	}
	pmids := []semantics.PMID{GlobalPMID(0), GlobalPMID(1), GlobalPMID(2), GlobalPMID(3)}
	var res source.Result
	t := time.Unix(1000, 0)
	for i := 0; i < 3; i++ {
		t = t.Add(time.Second)
		if err := w.Fetch(t, pmids, &res); err != nil {
			b.Fatal(err)
		}
	}
	if len(res.Sets[0].Values) != 100 || len(res.Sets[1].Values) != 100 || len(res.Sets[2].Values) != 1 || len(res.Sets[3].Values) != 100 {
		b.Fatalf("unexpected result %d %d %d %d", len(res.Sets[0].Values), len(res.Sets[1].Values), len(res.Sets[2].Values), len(res.Sets[3].Values))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t = t.Add(time.Second)
		if err := w.Fetch(t, pmids, &res); err != nil {
			b.Fatal(err)
		}
	}
}

func TestFetchDoesNotAllocate(t *testing.T) {
	r := testing.Benchmark(BenchmarkFetch)
	if r.AllocsPerOp() != 0 {
		t.Errorf("steady state Fetch allocates %d times (%d B) per fetch", r.AllocsPerOp(), r.AllocedBytesPerOp())
	}
}

package derive

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// fakeSource has a few metrics of every kind, with values that change at
// every fetch.
type fakeSource struct{ n int }

var fakeMetrics = []source.Metric{
	{Name: "c.u64", Desc: semantics.Desc{PMID: semantics.NewPMID(1, 0, 1), Type: semantics.TypeU64, InDom: semantics.InDomNull, Sem: semantics.SemCounter, Units: semantics.Units{DimCount: 1}}},
	{Name: "c.ms", Desc: semantics.Desc{PMID: semantics.NewPMID(1, 0, 2), Type: semantics.TypeU32, InDom: semantics.NewInDom(1, 1), Sem: semantics.SemCounter, Units: semantics.Units{DimTime: 1, ScaleTime: semantics.TimeMSec}}},
	{Name: "i.kb", Desc: semantics.Desc{PMID: semantics.NewPMID(1, 0, 3), Type: semantics.TypeDouble, InDom: semantics.NewInDom(1, 1), Sem: semantics.SemInstant, Units: semantics.Units{DimSpace: 1, ScaleSpace: semantics.SpaceKByte}}},
	{Name: "i.f", Desc: semantics.Desc{PMID: semantics.NewPMID(1, 0, 4), Type: semantics.TypeFloat, InDom: semantics.InDomNull, Sem: semantics.SemInstant}},
	{Name: "d.i32", Desc: semantics.Desc{PMID: semantics.NewPMID(1, 0, 5), Type: semantics.Type32, InDom: semantics.InDomNull, Sem: semantics.SemDiscrete, Units: semantics.Units{DimCount: 1}}},
	{Name: "s.str", Desc: semantics.Desc{PMID: semantics.NewPMID(1, 0, 6), Type: semantics.TypeString, InDom: semantics.NewInDom(1, 1), Sem: semantics.SemDiscrete}},
	{Name: "e.err", Desc: semantics.Desc{PMID: semantics.NewPMID(1, 0, 7), Type: semantics.Type64, InDom: semantics.InDomNull, Sem: semantics.SemInstant}},
}

func (f *fakeSource) Metrics() []source.Metric { return fakeMetrics }
func (f *fakeSource) Instances(semantics.InDom) []source.Instance {
	return []source.Instance{{ID: 0, Name: "zero"}, {ID: 3, Name: "three x"}, {ID: 7, Name: "seven"}}
}
func (f *fakeSource) Close() error { return nil }
func (f *fakeSource) Fetch(t time.Time, pmids []semantics.PMID, res *source.Result) error {
	f.n++
	res.Time = t
	res.Sets = res.Sets[:0]
	for _, p := range pmids {
		vs := source.ValueSet{PMID: p}
		insts := []int32{semantics.InNull}
		if p.Item() == 2 || p.Item() == 3 || p.Item() == 6 {
			insts = []int32{0, 3, 7}[:1+f.n%3]
			if f.n%4 == 1 {
				insts = []int32{7, 0}
			}
		}
		for k, in := range insts {
			x := int64(f.n*10 + k - 12)
			var v semantics.Value
			switch p.Item() {
			case 1:
				v = semantics.Uint64Value(uint64(x))
			case 2:
				v = semantics.Uint32Value(uint32(x))
			case 3:
				v = semantics.DoubleValue(float64(x) / 3)
			case 4:
				v = semantics.FloatValue(float32(x) / 7)
			case 5:
				v = semantics.Int32Value(int32(x))
			case 6:
				v = semantics.StringValue(strings.Repeat("s", k))
			case 7:
				vs.Err = semantics.ErrValue
			}
			if vs.Err == nil {
				vs.Values = append(vs.Values, source.InstValue{Inst: in, Value: v})
			}
		}
		if f.n%5 == 0 && p.Item() == 1 {
			vs.Values = nil
		}
		res.Sets = append(res.Sets, vs)
	}
	return nil
}

// FuzzExpression parses arbitrary expression text, and binds and evaluates
// what parses over a source with metrics of every kind: nothing may panic,
// errors are syntax or semantic errors, and error positions lie within the
// expression.
func FuzzExpression(f *testing.F) {
	for _, s := range []string{
		"c.u64 + c.u64", "delta(c.ms) / delta(c.u64)", "rate(c.ms)", "avg(i.kb) * 2", "-d.i32 + 1.5",
		"i.kb > 3 ? i.kb : -i.kb", "count(e.err) + count(s.str)", "max(i.kb) - min(i.kb)", "i.kb[three x]",
		"matchinst(!/^z/, i.kb)", "rescale(i.kb, \"Mbyte\")", "mkconst(3, type=64, semantics=counter, units=\"count\")",
		"defined(no.such) ? 1 : 2", "instant(c.u64) >= d.i32 && !(i.f < 0.5)", "scalar(s.str)", "(i.kb)[zero]",
		"sum(c.ms) + 1", "anon(PM_TYPE_U64)", "s.str", "e.err + 1", "seed..x", "((((", "a ? b : c ? d : e",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		var s Session
		e, err := s.Parse(expr)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Parse(%q): %T %v", expr, err, err)
			}
			if se.Pos < -1 || se.Pos > len(expr) {
				t.Fatalf("Parse(%q): position %d outside the expression", expr, se.Pos)
			}
			_ = se.Report("x")
			return
		}
		_ = e.String()
		_ = e.Names()
		w, err := Wrap(&fakeSource{}, []Definition{{Name: "fuzz.x", Expr: e}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range w.Errors() {
			var se *SemanticError
			if !errors.As(err, &se) {
				t.Fatalf("bind %q: %T %v", expr, err, err)
			}
		}
		var res source.Result
		t0 := time.Unix(1000, 0)
		for i := 0; i < 6; i++ {
			if err := w.Fetch(t0.Add(time.Duration(i)*time.Second), []semantics.PMID{GlobalPMID(0), fakeMetrics[0].Desc.PMID}, &res); err != nil {
				t.Fatal(err)
			}
		}
	})
}

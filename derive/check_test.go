package derive

import (
	"testing"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

func desc(item uint32, t semantics.Type, sem semantics.Sem, indom semantics.InDom, u semantics.Units) semantics.Desc {
	return semantics.Desc{PMID: semantics.NewPMID(2, 0, item), Type: t, Sem: sem, InDom: indom, Units: u}
}

// seedMetrics are the metrics of seed 002's worked example, plus a few more.
var seedMetrics = []source.Metric{
	{Name: "sample.milliseconds", Desc: desc(1, semantics.TypeDouble, semantics.SemCounter, semantics.InDomNull, semantics.Units{DimTime: 1, ScaleTime: semantics.TimeMSec})},
	{Name: "network.interface.in.bytes", Desc: desc(2, semantics.TypeU64, semantics.SemCounter, semantics.NewInDom(2, 3), semantics.Units{DimSpace: 1})},
	{Name: "network.interface.speed", Desc: desc(3, semantics.TypeFloat, semantics.SemInstant, semantics.NewInDom(2, 3), semantics.Units{DimSpace: 1, ScaleSpace: semantics.SpaceMByte, DimTime: -1, ScaleTime: semantics.TimeSec})},
	{Name: "disk.count", Desc: desc(4, semantics.TypeU32, semantics.SemCounter, semantics.NewInDom(2, 4), semantics.Units{DimCount: 1})},
	{Name: "mem.kb", Desc: desc(5, semantics.TypeU64, semantics.SemInstant, semantics.InDomNull, semantics.Units{DimSpace: 1, ScaleSpace: semantics.SpaceKByte})},
	{Name: "load", Desc: desc(6, semantics.TypeFloat, semantics.SemInstant, semantics.NewInDom(2, 5), semantics.Units{})},
	{Name: "name", Desc: desc(7, semantics.TypeString, semantics.SemDiscrete, semantics.InDomNull, semantics.Units{})},
	{Name: "temp", Desc: desc(8, semantics.TypeDouble, semantics.SemInstant, semantics.InDomNull, semantics.Units{ExtraUnit: 1, ExtraScale: 1})},
}

// TestDescriptors checks descriptor propagation against seed 002's tables
// and worked example, and pcp-spec.md section 4.4.
func TestDescriptors(t *testing.T) {
	for _, c := range []struct {
		expr, typ, sem, units string
		indom                 semantics.InDom
	}{
		// seed 002 worked example: DOUBLE, Mbyte/sec
		{"network.interface.speed - delta(network.interface.in.bytes) / delta(sample.milliseconds)", "double", "instant", "Mbyte / sec", semantics.NewInDom(2, 3)},
		{"delta(sample.milliseconds)", "double", "instant", "millisec", semantics.InDomNull},
		{"delta(network.interface.in.bytes)", "double", "instant", "byte", semantics.NewInDom(2, 3)},
		{"delta(network.interface.in.bytes) / delta(sample.milliseconds)", "double", "instant", "byte / millisec", semantics.NewInDom(2, 3)},
		{"rate(sample.milliseconds)", "double", "instant", "", semantics.InDomNull},
		{"rate(disk.count)", "double", "instant", "count / sec", semantics.NewInDom(2, 4)},
		{"count(name)", "u32", "instant", "count", semantics.InDomNull},
		{"sum(disk.count)", "u32", "counter", "count", semantics.InDomNull},
		{"avg(disk.count)", "float", "instant", "count", semantics.InDomNull},
		{"-disk.count", "32", "instant", "count", semantics.NewInDom(2, 4)},
		{"disk.count > 0", "u32", "counter", "", semantics.NewInDom(2, 4)}, // the quirk of section 4.4
		{"mem.kb * 2", "u64", "instant", "Kbyte", semantics.InDomNull},
		{"mem.kb / 2", "double", "instant", "Kbyte", semantics.InDomNull},
		{"instant(disk.count)", "u32", "instant", "count", semantics.NewInDom(2, 4)},
		{"mkconst(3, type=64, semantics=counter, units=\"Kbyte/sec\")", "64", "counter", "Kbyte / sec", semantics.InDomNull},
		{"rescale(mem.kb, \"Mbyte\")", "u64", "instant", "Mbyte", semantics.InDomNull},
		{"defined(no.such) ? 1 : 2", "u32", "discrete", "", semantics.InDomNull},
		{"load > 1 ? load : -load", "float", "instant", "", semantics.NewInDom(2, 5)},
		{"temp * 2", "double", "instant", "temperature (C)", semantics.InDomNull},
	} {
		e, err := Parse(c.expr)
		if err != nil {
			t.Errorf("%s: %v", c.expr, err)
			continue
		}
		ms, errs := Describe(seedMetrics, []Definition{{Name: "x", Expr: e}})
		if len(errs) > 0 {
			t.Errorf("%s: %v", c.expr, errs)
			continue
		}
		var d semantics.Desc
		for _, m := range ms {
			if m.Name == "x" {
				d = m.Desc
			}
		}
		if d.Type.String() != c.typ || d.Sem.String() != c.sem || d.Units.String() != c.units || d.InDom != c.indom || d.PMID != GlobalPMID(0) {
			t.Errorf("%s: %s %s %q %s %s, want %s %s %q %s", c.expr, d.Type, d.Sem, d.Units.String(), d.InDom, d.PMID, c.typ, c.sem, c.units, c.indom)
		}
	}
}

// TestSemanticErrors checks the messages of pcp-spec.md section 4.6 not
// covered by the corpus.
func TestSemanticErrors(t *testing.T) {
	for _, c := range []struct{ expr, msg string }{
		{"disk.count + mem.kb", "Semantic error: derived metric x: disk.count + mem.kb: Illegal operator for counter and non-counter"},
		{"disk.count * mem.kb", "Semantic error: derived metric x: disk.count * mem.kb: Non-counter and not dimensionless for right operand"},
		{"mem.kb * disk.count", "Semantic error: derived metric x: mem.kb * disk.count: Non-counter and not dimensionless for left operand"},
		{"mem.kb - disk.count", "Semantic error: derived metric x: mem.kb - disk.count: Illegal operator for non-counter and counter"},
		{"load + network.interface.speed", "Semantic error: derived metric x: load + network.interface.speed: Dimensions are not the same"},
		{"load * load + instant(disk.count)", "Semantic error: derived metric x: <expr> + <expr>: Operands should have the same instance domain"},
		{"rate(network.interface.speed)", "Semantic error: derived metric x: RATE(network.interface.speed): Incorrect time dimension for operand"},
		{"-name", "Semantic error: derived metric x: - name: Non-arithmetic operand for unary negation"},
		{"name ? 1 : 2", "Semantic error: derived metric x: name ? 1 : 2: Non-arithmetic operand for ternary guard"},
		{"load > 1 ? 1 : 2", "Semantic error: derived metric x: <expr> ? 1 : 2: Non-scalar ternary guard with scalar expressions"},
		{"mem.kb > 1 ? mem.kb : load", "Semantic error: derived metric x: mem.kb : load: Different types for ternary operands"},
		{"1 + name", "Semantic error: derived metric x: 1 + name: Non-arithmetic type for right operand"},
		{"temp * temp", "Semantic error: derived metric x: temp * temp: Extra units not allowed for both operands of *"},
		{"rescale(mem.kb, \"sec\")", "Semantic error: derived metric x: mem.kb RESCALE sec: Incompatible dimensions"},
	} {
		e, err := Parse(c.expr)
		if err != nil {
			t.Errorf("%s: %v", c.expr, err)
			continue
		}
		_, errs := Describe(seedMetrics, []Definition{{Name: "x", Expr: e}})
		if len(errs) != 1 || errs[0].Error() != c.msg {
			t.Errorf("%s:\n got  %v\n want %s", c.expr, errs, c.msg)
		}
	}
}

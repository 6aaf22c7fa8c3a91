package semantics

import (
	"math"
	"testing"
)

// Expected strings: pcp-spec.md section 6 (checked there against libpcp
// 6.0.3's pmUnitsStr) and the corpus's pminfo answers.
func TestUnitsString(t *testing.T) {
	for _, c := range []struct {
		u          Units
		want, pcp6 string
	}{
		{UnitsFromWord(0x1f013000), "Kbyte / sec", ""},
		{UnitsFromWord(0x01002000), "millisec", ""},
		{UnitsFromWord(0x00100300), "count x 10^3", ""},
		{UnitsFromWord(0x01003000), "sec", ""},
		{Units{DimSpace: 1, ScaleSpace: SpaceKByte}, "Kbyte", ""},
		{Units{DimCount: 1, ScaleCount: 1}, "count x 10", ""},
		{Units{DimCount: 1, DimTime: -1, ScaleTime: TimeSec}, "count / sec", ""},
		{Units{DimSpace: 1, DimCount: -1}, "byte / count", ""},
		{Units{DimTime: -1, ScaleTime: TimeSec}, "/ sec", ""},
		{Units{DimSpace: 2, ScaleSpace: SpaceMByte}, "Mbyte^2", ""},
		{Units{DimSpace: 1, DimTime: -1, ScaleSpace: SpaceMByte, ScaleTime: TimeHour}, "Mbyte / hour", ""},
		{Units{DimCount: 1, DimTime: -1, ScaleCount: 6, ScaleTime: TimeSec}, "count x 10^6 / sec", ""},
		{Units{DimTime: 2, ScaleTime: TimeSec}, "sec^2", ""},
		{Units{DimCount: 1, ScaleCount: -2}, "count x 10^-2", ""},
		{Units{}, "", ""},
		{Units{ScaleCount: 6}, "count x 10^6", "x 10^6"},
	} {
		if got := c.u.String(); got != c.want {
			t.Errorf("%#08x: String %q, want %q", c.u.Word(), got, c.want)
		}
		p6 := c.pcp6
		if p6 == "" {
			p6 = c.want
		}
		if got := c.u.StringPCP6(); got != p6 {
			t.Errorf("%#08x: StringPCP6 %q, want %q", c.u.Word(), got, p6)
		}
	}
}

func TestUnitsFactor(t *testing.T) {
	for _, c := range []struct {
		u    Units
		want float64
	}{
		{UnitsFromWord(0x1f013000), 1024},              // Kbyte / sec
		{UnitsFromWord(0x01002000), 1e-3},              // millisec
		{UnitsFromWord(0x00100300), 1e3},               // count x 10^3
		{Units{DimTime: 1, ScaleTime: TimeHour}, 3600}, // hour
		{Units{DimTime: 1, ScaleTime: TimeUSec}, 1e-6},
		{Units{DimTime: 1, ScaleTime: TimeNSec}, 1e-9},
		{Units{DimSpace: 1, ScaleSpace: SpaceTByte}, 1 << 40},
		{Units{DimSpace: 1, DimTime: -1, ScaleSpace: SpaceMByte, ScaleTime: TimeHour}, 1048576.0 / 3600},
		{Units{DimCount: 1, ScaleCount: -2}, 0.01},
		{Units{DimTime: 2, ScaleTime: TimeSec}, 1},
		{Units{}, 1},
	} {
		if got := c.u.Factor(); math.Abs(got-c.want) > 1e-12*math.Abs(c.want) {
			t.Errorf("%q: Factor %v, want %v", c.u.String(), got, c.want)
		}
	}
	if f := (Units{DimSpace: 1, ScaleSpace: 12}).Factor(); !math.IsNaN(f) {
		t.Errorf("bad space scale: %v, want NaN", f)
	}
}

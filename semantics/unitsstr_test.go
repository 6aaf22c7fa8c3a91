package semantics

import "testing"

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

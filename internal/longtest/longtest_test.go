package longtest

import "testing"

func TestEnabledAndStride(t *testing.T) {
	for _, c := range []struct {
		long, ci  string
		enabled   bool
		n, want   int
		strideOut int
	}{
		{"", "", false, 100, 10, 10},
		{"", "", false, 101, 10, 11},
		{"", "", false, 5, 10, 1},
		{"", "", false, 100, 0, 1},
		{"0", "", false, 100, 25, 4},
		{"1", "", true, 100, 10, 1},
		{"", "true", true, 100, 10, 1},
		{"", "1", false, 100, 50, 2},
		{"e2e", "true", false, 100, 50, 2},
		{"e2e", "", false, 100, 50, 2},
		{"0", "true", false, 100, 50, 2},
		{"1", "true", true, 100, 50, 1},
	} {
		t.Setenv("PCPX_LONG_TESTS", c.long)
		t.Setenv("CI", c.ci)
		if got := Enabled(); got != c.enabled {
			t.Errorf("PCPX_LONG_TESTS=%q CI=%q: Enabled() = %v, want %v", c.long, c.ci, got, c.enabled)
		}
		if got := Stride(c.n, c.want); got != c.strideOut {
			t.Errorf("PCPX_LONG_TESTS=%q CI=%q: Stride(%d, %d) = %d, want %d", c.long, c.ci, c.n, c.want, got, c.strideOut)
		}
	}
}

func TestEndToEnd(t *testing.T) {
	for _, c := range []struct {
		long, ci string
		want     bool
	}{
		{"", "", false},
		{"0", "", false},
		{"0", "true", false},
		{"", "true", true},
		{"1", "", true},
		{"e2e", "", true},
		{"e2e", "true", true},
	} {
		t.Setenv("PCPX_LONG_TESTS", c.long)
		t.Setenv("CI", c.ci)
		if got := endToEnd(); got != c.want {
			t.Errorf("PCPX_LONG_TESTS=%q CI=%q: endToEnd() = %v, want %v", c.long, c.ci, got, c.want)
		}
	}
}

package semantics

import "testing"

// TestMatchMetricName: names select themselves and their subtree, as
// pminfo's arguments do; globs match the whole name as fnmatch(3) without
// FNM_PATHNAME (the answers of glibc's fnmatch, flags 0).
func TestMatchMetricName(t *testing.T) {
	for _, c := range []struct {
		pat, name string
		ok        bool
	}{
		{"kernel.percpu", "kernel.percpu", true},
		{"kernel.percpu", "kernel.percpu.cpu.user", true},
		{"kernel.percpu", "kernel.percpux", false},
		{"kernel.percpu", "kernel", false},
		{"kernel", "kernel.all.load", true},
		{"a+b", "a+b", true},
		{"a+b", "aab", false},
		{"mmv.*", "mmv.a.b", true},
		{"mmv.*", "mmv.", true},
		{"mmv.*", "mmvx", false},
		{"network.*.in.*", "network.interface.in.bytes", true},
		{"network.*.in.*", "network.interface.out.bytes", false},
		{"*.bytes", "network.interface.in.bytes", true},
		{"*", "x", true},
		{"*a*b", "xxaxxbb", true},
		{"*a*b", "xxaxxbc", false},
		{"mmv.?", "mmv.a", true},
		{"mmv.?", "mmv.ab", false},
		{"mmv.[ab]", "mmv.b", true},
		{"mmv.[!ab]", "mmv.b", false},
		{"mmv.[!ab]", "mmv.c", true},
		{"mmv.[^ab]", "mmv.c", true},
		{"mmv.[a-c]x", "mmv.bx", true},
		{"mmv.[a-c]x", "mmv.dx", false},
		{"mmv.[]]", "mmv.]", true},
		{"mmv.[!]]", "mmv.]", false},
		{`mmv.\*`, "mmv.*", true},
		{`mmv.\*`, "mmv.x", false},
		{"kernel.all.cpu.[!i]*", "kernel.all.cpu.idle", false},
		{"kernel.all.cpu.[!i]*", "kernel.all.cpu.user", true},
	} {
		if got := MatchMetricName(c.pat, c.name); got != c.ok {
			t.Errorf("%q ~ %q: %v, want %v", c.pat, c.name, got, c.ok)
		}
	}
	for _, bad := range []string{"", ".kernel", "kernel.", "a..b", "a[b", "mmv.[!"} {
		if CheckMetricPattern(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	for _, good := range []string{"kernel", "kernel.all.load", "*", "a[]]", `a\[`} {
		if err := CheckMetricPattern(good); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
}

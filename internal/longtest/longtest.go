// Package longtest says whether the long test sweeps run.
//
// `go test ./...` runs a representative part of each long sweep (every
// corpus answer, every byte offset, the libpcp cross-checks, long
// end-to-end runs) so that it finishes in about two minutes on a 2-core
// machine and still catches regressions. PCPX_LONG_TESTS=1 runs all of
// them; .ci/run sets it, so CI runs everything. CI=true implies it.
// PCPX_LONG_TESTS=e2e runs the long end-to-end tests (Skip) but only the
// representative part of the sweeps (Enabled, Stride): .ci/run's race
// pass, where the detector multiplies the sweeps' CPU time, not the
// end-to-end tests' waiting.
package longtest

import (
	"os"
	"testing"
)

// Enabled reports whether the long sweeps run in full (PCPX_LONG_TESTS set
// to anything but "", "0" or "e2e", or CI=true with it unset).
func Enabled() bool {
	switch v := os.Getenv("PCPX_LONG_TESTS"); v {
	case "":
		return os.Getenv("CI") == "true"
	case "0", "e2e":
		return false
	}
	return true
}

// endToEnd reports whether the long end-to-end tests run: as Enabled, and
// with PCPX_LONG_TESTS=e2e.
func endToEnd() bool {
	return Enabled() || os.Getenv("PCPX_LONG_TESTS") == "e2e"
}

// Skip skips t, a long end-to-end test, unless those run; why says what
// the test is.
func Skip(t testing.TB, why string) {
	t.Helper()
	if !endToEnd() {
		t.Skipf("long test (%s): set PCPX_LONG_TESTS=1 to run it", why)
	}
}

// Stride returns the step a sweep over n cases takes: 1 when the long
// sweeps run, else the step that visits about want of them (at least 1).
// A sweep visiting i = k*stride (plus an offset that varies, if it likes)
// then covers its whole range evenly.
func Stride(n, want int) int {
	if Enabled() || want <= 0 || n <= want {
		return 1
	}
	return (n + want - 1) / want
}

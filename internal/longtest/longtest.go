// Package longtest says whether the long test sweeps run.
//
// `go test ./...` runs a representative part of each long sweep (every
// corpus answer, every byte offset, the libpcp cross-checks, long
// end-to-end runs) so that it finishes in about two minutes on a 2-core
// machine and still catches regressions. PCPX_LONG_TESTS=1 runs all of
// them; .ci/run sets it, so CI runs everything. CI=true implies it.
package longtest

import (
	"os"
	"testing"
)

// Enabled reports whether the long sweeps run in full (PCPX_LONG_TESTS set
// to anything but "" or "0", or CI=true).
func Enabled() bool {
	if v := os.Getenv("PCPX_LONG_TESTS"); v != "" && v != "0" {
		return true
	}
	return os.Getenv("CI") == "true"
}

// Skip skips t unless the long sweeps run; why says what the test is.
func Skip(t testing.TB, why string) {
	t.Helper()
	if !Enabled() {
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

package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// skipRecorder is a testing.TB that records Skipf and Fatalf instead of
// ending the test.
type skipRecorder struct {
	testing.TB
	msg string
}

func (r *skipRecorder) Helper() {}
func (r *skipRecorder) Skipf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
}
func (r *skipRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
}

// TestRequireSaysHowToGetPeer: a missing OpenTelemetry Collector (or helm)
// skips a test with the script that builds it and the variable that
// points the tests at it, in CI and outside.
func TestRequireSaysHowToGetPeer(t *testing.T) {
	for _, ci := range []string{"false", "true"} {
		t.Setenv("CI", ci)
		t.Setenv("PCP_EXPORTER_E2E", "")
		t.Setenv("PATH", t.TempDir())
		for name, want := range map[string][]string{
			"otelcol": {"scripts/build-otelcol.sh", "PCP_EXPORTER_OTELCOL="},
			"helm":    {"scripts/build-helm.sh", "PCP_EXPORTER_HELM="},
			"pmcd":    {"scripts/install-test-deps.sh"},
		} {
			t.Setenv("PCP_EXPORTER_"+envName(name), "")
			r := &skipRecorder{TB: t}
			Require(r, name)
			for _, w := range want {
				if !strings.Contains(r.msg, w) {
					t.Errorf("CI=%s: %s missing: %q does not say %q", ci, name, r.msg, w)
				}
			}
		}
	}
}

// Package e2e finds the real peers that end-to-end tests run against (pmcd,
// pmproxy, pminfo, Prometheus, promtool, the OpenTelemetry Collector, ...)
// and reads the specs they are checked against (HostMetrics: the
// hostmetrics receiver's metadata.yaml files).
//
// A test that needs a peer calls Require. Outside CI a missing peer skips the
// test; in CI (CI=true, or PCP_EXPORTER_E2E=1) it fails it, because .ci/run
// installs every peer and a skipped end-to-end test there would hide a defect.
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// Mandatory reports whether missing peers must fail tests instead of skipping them.
func Mandatory() bool {
	return os.Getenv("CI") == "true" || os.Getenv("PCP_EXPORTER_E2E") == "1"
}

// Require returns the paths of the named executables (looked up in PATH, or
// taken from the environment variable PCP_EXPORTER_<NAME> when set, e.g.
// PCP_EXPORTER_OTELCOL), skipping or failing t when one is missing.
func Require(t testing.TB, names ...string) []string {
	t.Helper()
	paths := make([]string, len(names))
	for i, n := range names {
		p, err := Lookup(n)
		if err != nil {
			if Mandatory() {
				t.Fatalf("end-to-end peer %q not found: %v%s", n, err, hint(n))
			}
			t.Skipf("end-to-end peer %q not found (set CI=true to make this a failure): %v%s", n, err, hint(n))
		}
		paths[i] = p
	}
	return paths
}

// builtPeers are the peers Debian does not package: a script of scripts/
// builds each into /var/cache/pcp-exporter-ci and prints its path.
var builtPeers = map[string]string{
	"otelcol": "scripts/build-otelcol.sh",
	"helm":    "scripts/build-helm.sh",
}

// hint says how to get a missing peer: the script that builds it and the
// variable that points the tests at it, else the Debian packages.
func hint(name string) string {
	if script, ok := builtPeers[name]; ok {
		return fmt.Sprintf("; build it with %s (from the repository root) and export PCP_EXPORTER_%s=$(%s)", script, envName(name), script)
	}
	return "; scripts/install-test-deps.sh installs the peers"
}

// Lookup finds one executable as Require does, without a test.
func Lookup(name string) (string, error) {
	env := "PCP_EXPORTER_" + envName(name)
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", err
		}
		return p, nil
	}
	return exec.LookPath(name)
}

func envName(name string) string {
	b := []byte(name)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z':
			b[i] = c - 'a' + 'A'
		case c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		default:
			b[i] = '_'
		}
	}
	return string(b)
}

// RequirePMCD holds the local pmcd's lock shared (LockPMCD) and checks that
// it answers (`pminfo -f pmcd.version`), skipping t when it does not, or
// failing it when peers are mandatory.
func RequirePMCD(t testing.TB) {
	t.Helper()
	pminfo := Require(t, "pminfo")[0]
	LockPMCD(t, false)
	if out, err := exec.Command(pminfo, "-f", "pmcd.version").CombinedOutput(); err != nil {
		if Mandatory() {
			t.Fatalf("the local pmcd is not answering (start it with /etc/init.d/pmcd start): %v\n%s", err, out)
		}
		t.Skipf("the local pmcd is not answering (set CI=true to make this a failure): %v", err)
	}
}

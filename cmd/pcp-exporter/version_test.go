package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/prometheus/common/version"
)

// TestVersionWithoutLdflags builds the command with a plain go build (no
// ldflags) from this checkout and checks that --version reports the
// version and revision Go embeds: git rev-parse HEAD, with "-modified"
// when git status lists a change (as Go's vcs.modified does).
func TestVersionWithoutLdflags(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the command")
	}
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git not found")
	}
	top, err := exec.Command(git, "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(strings.TrimSpace(string(top)), ".git")); err != nil || !fi.IsDir() {
		t.Skip("a git worktree: go build stamps no VCS information there (it looks for a .git directory)")
	}
	head, err := exec.Command(git, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	status, err := exec.Command(git, "status", "--porcelain").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := strings.TrimSpace(string(head))
	if len(status) > 0 {
		want += "-modified"
	}
	bin := filepath.Join(t.TempDir(), "pcp-exporter")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=true")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	first := strings.SplitN(string(out), "\n", 2)[0]
	m := regexp.MustCompile(`^pcp-exporter, version (\S+) \(branch: .*, revision: (\S+)\)$`).FindStringSubmatch(first)
	if m == nil {
		t.Fatalf("--version: %q", out)
	}
	// go build of a checkout: a pseudo-version naming HEAD (+dirty when modified)
	if short := want[:12]; !strings.Contains(m[1], short) {
		t.Errorf("version %q does not name HEAD %s", m[1], short)
	}
	if m[2] != want {
		t.Errorf("revision %q, git says %q", m[2], want)
	}
}

// TestStampVersion: without vcs settings (go run, a module download) the
// version is the module's and the revision the commit its pseudo-version
// names; ldflags' values win.
func TestStampVersion(t *testing.T) {
	defer func(v, r string) { version.Version, version.Revision = v, r }(version.Version, version.Revision)
	for _, c := range []struct {
		ldVersion, ldRevision string
		bi                    debug.BuildInfo
		version, revision     string
	}{
		{bi: debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, version: "(devel)"},
		{bi: debug.BuildInfo{Main: debug.Module{Version: "v1.2.0"}}, version: "v1.2.0"},
		{bi: debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261127152312-fd65d31790db+dirty"}}, version: "v0.0.0-20261127152312-fd65d31790db+dirty", revision: "fd65d31790db"},
		{bi: debug.BuildInfo{Main: debug.Module{Version: "v1.2.1-0.20261127152312-fd65d31790db"}}, version: "v1.2.1-0.20261127152312-fd65d31790db", revision: "fd65d31790db"},
		{bi: debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261127152312-fd65d31790db"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "fd65d31790db7fff0ca6b80d9db9c9d1cfa9a800"}, {Key: "vcs.modified", Value: "true"}}},
			version: "v0.0.0-20261127152312-fd65d31790db", revision: "fd65d31790db7fff0ca6b80d9db9c9d1cfa9a800-modified"},
		{ldVersion: "v1.0.0", ldRevision: "abc", bi: debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "fd65"}}}, version: "v1.0.0", revision: "abc"},
	} {
		version.Version, version.Revision = c.ldVersion, c.ldRevision
		stampVersion(&c.bi)
		if version.Version != c.version || version.Revision != c.revision {
			t.Errorf("%+v: version %q revision %q, want %q %q", c.bi, version.Version, version.Revision, c.version, c.revision)
		}
	}
}

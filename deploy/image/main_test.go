package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestImage builds the static binary from this repository, puts it in an
// image, and checks the image as CI does: configuration, and the binary
// extracted from the image's filesystem answering --version.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the pcp-exporter binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "pcp-exporter")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/pcp-exporter")
	build.Dir = "../.."
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	img, err := Build(Options{Binary: bin, Version: "test", Created: time.Unix(0, 0).UTC(), Arch: "amd64"})
	if err != nil {
		t.Fatal(err)
	}
	layoutDir := filepath.Join(dir, "layout")
	if err := WriteLayout(layoutDir, img, "example.invalid/pcp-exporter:test"); err != nil {
		t.Fatal(err)
	}
	out, err := Check(layoutDir, dir, []string{"--version"}, "pcp-exporter, version ")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "pcp-exporter, version ") {
		t.Errorf("--version printed %q", out)
	}
	// Reproducible: the same inputs give the same digest.
	img2, err := Build(Options{Binary: bin, Version: "test", Created: time.Unix(0, 0).UTC(), Arch: "amd64"})
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := img2.Digest()
	if d1 != d2 {
		t.Errorf("digests differ between identical builds: %s %s", d1, d2)
	}
}

// TestBuildRejects: a file that is not an executable is refused.
func TestBuildRejects(t *testing.T) {
	f := filepath.Join(t.TempDir(), "not-elf")
	if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Build(Options{Binary: f, Arch: "amd64"}); err == nil || !strings.Contains(err.Error(), "not an ELF executable") {
		t.Errorf("err = %v", err)
	}
}

// TestDockerfileMatches: the Dockerfile users build declares the same user,
// entrypoint, default command and port as the image CI builds.
func TestDockerfileMatches(t *testing.T) {
	f, err := os.Open("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string]string{
		"USER":       user,
		"ENTRYPOINT": `["` + binaryPath + `"]`,
		"CMD":        `["serve"]`,
		"EXPOSE":     strings.TrimSuffix(port, "/tcp"),
		"ENV":        "PCP_TMP_DIR=/var/lib/pcp/tmp",
	}
	got := map[string]string{}
	final := false
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		instr, arg, _ := strings.Cut(line, " ")
		if instr == "FROM" {
			final = strings.TrimSpace(arg) == "scratch"
		}
		if final {
			got[instr] = strings.TrimSpace(arg)
		}
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("Dockerfile final stage %s %q, want %q", k, got[k], v)
		}
	}
}

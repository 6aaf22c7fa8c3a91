package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
)

// runMain runs `pcp-exporter args...` as a subprocess with env added and
// returns its exit status and output; one still running after a minute is
// killed (a command that should have exited).
func runMain(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), "PCP_EXPORTER_TEST_MAIN=1"), env...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, string(out)
}

// scrapeUntil scrapes base's /metrics until it holds every one of want
// (up to 90 s: the local pmcd's metadata takes seconds to read, and more
// on a loaded machine) and returns the last scrape.
func scrapeUntil(t *testing.T, base string, want ...string) string {
	t.Helper()
	client := &http.Client{Timeout: 60 * time.Second}
	var body string
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		resp, err := client.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		missing := false
		for _, w := range want {
			if !strings.Contains(body, w) {
				missing = true
			}
		}
		if !missing {
			return body
		}
	}
	t.Fatalf("the scrape lacks one of %q:\n%s", want, body)
	return ""
}

// logged waits (up to 5 s) for a line of the exporter's log holding all of
// want.
func logged(t *testing.T, out *lockedBuffer, want ...string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		for _, line := range strings.Split(out.String(), "\n") {
			found := true
			for _, w := range want {
				found = found && strings.Contains(line, w)
			}
			if found {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Errorf("no log line with %q:\n%s", want, out)
			return
		}
	}
}

// copyCorpusArchive copies the files of a corpus archive into dir.
func copyCorpusArchive(t *testing.T, base, dir string) {
	t.Helper()
	ms, _ := filepath.Glob(filepath.Join(corpus, "archives", base+".*"))
	if len(ms) == 0 {
		t.Fatalf("no corpus archive %s", base)
	}
	for _, m := range ms {
		b, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(m)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestServeNoSource: with no MMV directory, no archive and no --demo,
// serve exits 1 with one line naming what it looked for.
func TestServeNoSource(t *testing.T) {
	tmp := filepath.Join(t.TempDir(), "none")
	code, out := runMain(t, []string{"PCP_TMP_DIR=" + tmp, "PMCD_SOCKET=" + filepath.Join(tmp, "no.socket"), "PMCD_PORT=1"}, "serve", "--web.listen-address=127.0.0.1:0")
	if code != 1 || strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Fatalf("exit %d, want 1 with one line:\n%s", code, out)
	}
	for _, w := range []string{"nothing to serve", filepath.Join(tmp, "mmv"), "--mmv.dir", "--archive", "pmcd", "--demo"} {
		if !strings.Contains(out, w) {
			t.Errorf("the error does not say %q: %s", w, out)
		}
	}
}

// TestServeDemo: --demo serves the embedded recording, and says so.
func TestServeDemo(t *testing.T) {
	t.Parallel()
	addr := e2e.FreeAddr(t)
	out := startExporter(t, http.DefaultClient, "http://"+addr, "--demo", "--web.listen-address="+addr)
	body := scrapeUntil(t, "http://"+addr, `kernel_all_load{`, `pcp_exporter_source_up{reason="",source=`)
	if !strings.Contains(body, "\nmem_util_used_bytes ") {
		t.Errorf("no memory metric in the demo:\n%.500s", body)
	}
	logged(t, out, "embedded demo recording in a loop")
}

// TestServeArchiveHealth: an archive path that names nothing is reported
// missing under the name given, then followed once it appears; a
// finished archive replayed to its end is reported ended, unless looped.
func TestServeArchiveHealth(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "host")
	addr := e2e.FreeAddr(t)
	out := startExporter(t, http.DefaultClient, "http://"+addr, "serve", "--archive="+dir, "--web.listen-address="+addr)
	scrapeUntil(t, "http://"+addr, `pcp_exporter_source_up{reason="missing",source="`+dir+`"} 0`)
	logged(t, out, "reason=missing", dir)
	os.Mkdir(dir, 0o755)
	copyCorpusArchive(t, "marks/parts/part_a", dir)
	scrapeUntil(t, "http://"+addr, `pcp_exporter_source_up{reason="",source="`+dir+`"} 1`, "marks_bytes_total 25425")

	arch := filepath.Join(corpus, "archives", "seedtables", "seedtables")
	addr = e2e.FreeAddr(t)
	out = startExporter(t, http.DefaultClient, "http://"+addr, "serve", "--archive="+arch, "--replay.speed=100000", "--web.listen-address="+addr)
	scrapeUntil(t, "http://"+addr, `pcp_exporter_source_up{reason="ended",source="`+arch+`"} 0`)
	logged(t, out, "reason=ended")
	addr = e2e.FreeAddr(t)
	startExporter(t, http.DefaultClient, "http://"+addr, "serve", "--archive="+arch, "--replay.speed=100000", "--replay.loop", "--web.listen-address="+addr)
	for i := 0; i < 3; i++ {
		scrapeUntil(t, "http://"+addr, `pcp_exporter_source_up{reason="",source="`+arch+`"} 1`)
	}
}

// TestServeFlagErrors: bad replay and archive flags name the flag and the
// value, exit 2.
func TestServeFlagErrors(t *testing.T) {
	for _, args := range [][]string{{"--replay.speed=0"}, {"--replay.speed=-2"}, {"--archive.delay=-1s"}} {
		code, out := runMain(t, nil, append([]string{"serve", "--web.listen-address=127.0.0.1:0", "--demo"}, args...)...)
		if code != 2 || !strings.Contains(out, args[0]) {
			t.Errorf("%v: exit %d: %s", args, code, out)
		}
	}
}

// TestInfoDumpDirectory: info and dump accept a directory of archives like
// the other commands (its archives in the order of their start), and an
// archive name with a typo is reported under the name given.
func TestInfoDumpDirectory(t *testing.T) {
	dir := t.TempDir()
	copyCorpusArchive(t, "marks/parts/part_b", dir)
	copyCorpusArchive(t, "marks/parts/part_a", dir)
	a, b := filepath.Join(dir, "part_a"), filepath.Join(dir, "part_b")
	for _, c := range []struct {
		cmd  string
		dir  []string
		each [][]string
	}{
		{"info", []string{"info", dir}, [][]string{{"info", a, b}}},
		{"dump", []string{"dump", dir}, [][]string{{"dump", a}, {"dump", b}}},
	} {
		code, got := runMain(t, nil, c.dir...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c.dir, code, got)
		}
		var want bytes.Buffer
		for _, args := range c.each {
			code, out := runMain(t, nil, args...)
			if code != 0 {
				t.Fatalf("%v: exit %d: %s", args, code, out)
			}
			want.WriteString(out)
		}
		if got != want.String() || !strings.Contains(got, "marks.counter") {
			t.Errorf("%s of the directory differs from %s of its archives:\n%.400s\nwant\n%.400s", c.cmd, c.cmd, got, want.String())
		}
	}
	for _, cmd := range []string{"info", "dump", "replay"} {
		typo := filepath.Join(dir, "part_c")
		code, out := runMain(t, nil, cmd, typo)
		if code == 0 || !strings.HasPrefix(out, "pcp-exporter "+cmd+": "+typo+": no such archive") {
			t.Errorf("%s %s: exit %d: %s", cmd, typo, code, out)
		}
	}
}

// TestServeMMVMissing: an MMV directory named that does not exist is
// reported missing (not up and ready), with a warning naming it.
func TestServeMMVMissing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mmv")
	addr := e2e.FreeAddr(t)
	out := startExporter(t, http.DefaultClient, "http://"+addr, "serve", "--mmv.dir="+dir, "--web.listen-address="+addr)
	scrapeUntil(t, "http://"+addr, `pcp_exporter_source_up{reason="missing",source="`+dir+`"} 0`)
	logged(t, out, "reason=missing", dir)
	os.Mkdir(dir, 0o755)
	scrapeUntil(t, "http://"+addr, `pcp_exporter_source_up{reason="",source="`+dir+`"} 1`)
}

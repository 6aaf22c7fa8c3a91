package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runCLI runs pcp-exporter args as a subprocess (at most 20 s) and returns
// its exit status and standard error.
func runCLI(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), "PCP_EXPORTER_TEST_MAIN=1"), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), stderr.String()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, stderr.String()
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%v did not end within 20 s", args)
	}
	return 0, ""
}

// TestFlagErrors: each bad value ends the command with exit status 2 and
// one line naming the flag and the value, before any work.
func TestFlagErrors(t *testing.T) {
	t.Parallel()
	arch := filepath.Join(corpus, "archives", "seedtables", "seedtables")
	noMMV := []string{"PCP_TMP_DIR=" + t.TempDir()}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--web.telemetry-path="}, "--web.telemetry-path is empty"},
		{[]string{"serve", "--web.telemetry-path=metrics"}, `--web.telemetry-path="metrics": want a path starting with /`},
		{[]string{"serve", "--web.telemetry-path=/-/healthy"}, `--web.telemetry-path="/-/healthy"`},
		{[]string{"serve", "--web.telemetry-path=/-/ready"}, `--web.telemetry-path="/-/ready"`},
		{[]string{"serve", "--replay.speed=0"}, "--replay.speed=0: want a positive finite number"},
		{[]string{"serve", "--replay.speed=-2"}, "--replay.speed=-2:"},
		{[]string{"serve", "--replay.speed=NaN"}, "--replay.speed=NaN:"},
		{[]string{"serve", "--replay.speed=+Inf"}, "--replay.speed=+Inf:"},
		{[]string{"serve", "--web.read-timeout=-1s"}, "--web.read-timeout=-1s"},
		{[]string{"serve", "--web.max-connections=-1"}, "--web.max-connections=-1"},
		{[]string{"serve", "--web.health-timeout=0s"}, "--web.health-timeout=0s"},
		{[]string{"serve", "--web.max-requests=-3"}, "--web.max-requests=-3"},
		{[]string{"serve", "--otlp.interval=0s", "--archive=" + arch}, "--otlp.interval=0s: want a positive duration"},
		{[]string{"serve", "--replay.start=yesterday", "--archive=" + arch}, `--replay.start="yesterday"`},
		{[]string{"serve", "--replay.start=+1000h", "--archive=" + arch}, "--replay.start 2024-02-11T16:00:10Z is after the end of the archives"},
		{[]string{"serve", "--replay.start=2001-01-01T00:00:00Z", "--archive=" + arch}, "--replay.start 2001-01-01T00:00:00Z is before the start of the archives"},
		{[]string{"replay", "--samples=-1", arch}, "--samples=-1"},
		{[]string{"replay", "--interval=0s", arch}, "--interval=0s: want a positive duration"},
		{[]string{"replay", "--interval=1ns", arch}, "--interval=1ns: "},
		{[]string{"replay", "--start=+10s", "--finish=+5s", arch}, "is before --start"},
		{[]string{"replay", "--start=2001-01-01T00:00:00Z", arch}, "--start 2001-01-01T00:00:00Z is before the start of the archives"},
		{[]string{"replay", "--start=+1000h", arch}, "is after the end of the archives"},
		{[]string{"replay", "--finish=2001-01-01T00:00:00Z", arch}, "--finish 2001-01-01T00:00:00Z is before the start of the archives"},
		{[]string{"replay", "--start=soon", arch}, `--start="soon": want RFC 3339 or +DURATION`},
		{[]string{"serve", "--replay.speed=abc"}, `--replay.speed="abc": strconv.ParseFloat`},
		{[]string{"serve", "--web.read-timeout=xx"}, `--web.read-timeout="xx": time: invalid duration`},
		{[]string{"serve", "--naming=foo"}, `--naming="foo": enum value must be one of`},
		{[]string{"replay", "--interval=q", arch}, `--interval="q": time: invalid duration`},
		{[]string{"backfill", "--step=0s", "--output=openmetrics:" + filepath.Join(t.TempDir(), "o"), arch}, "--step=0s: want a positive duration"},
		{[]string{"backfill", "--step=-1s", "--output=openmetrics:" + filepath.Join(t.TempDir(), "o"), arch}, "--step=-1s"},
		{[]string{"backfill", "--start=+1000h", "--output=openmetrics:" + filepath.Join(t.TempDir(), "o"), arch}, "is after the end of the archives"},
		{[]string{"backfill", "--start=+20s", "--finish=+10s", "--output=openmetrics:" + filepath.Join(t.TempDir(), "o"), arch}, "is before --start"},
	}
	for _, tc := range cases {
		code, stderr := runCLI(t, noMMV, tc.args...)
		lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
		if code != 2 || len(lines) != 1 || !strings.Contains(stderr, tc.want) || len(stderr) > 1024 {
			t.Errorf("%.120q: exit %d, %d lines (%d bytes), want exit 2 and one line with %q:\n%.600s", tc.args, code, len(lines), len(stderr), tc.want, stderr)
		}
	}
	// not a flag, but a name from the user: cut, not repeated whole
	code, stderr := runCLI(t, noMMV, "replay", arch, "x"+strings.Repeat("y", 100_000))
	if code != 1 || !strings.Contains(stderr, "... (100001 bytes): Unknown metric name") || len(stderr) > 1024 {
		t.Errorf("unknown 100 kB metric name: exit %d, %d bytes: %.400s", code, len(stderr), stderr)
	}
}

// TestHugeInputsClipped: a 10 MB derived expression is not repeated whole
// in the log.
func TestHugeInputsClipped(t *testing.T) {
	t.Parallel()
	arch := filepath.Join(corpus, "archives", "seedtables", "seedtables")
	cfg := filepath.Join(t.TempDir(), "derived.conf")
	expr := "seed.a + " + strings.Repeat("(", 10<<20)
	if err := os.WriteFile(cfg, []byte("huge.metric = "+expr+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr := runCLI(t, nil, "replay", "--samples=1", "--derived.config="+cfg, arch, "seed")
	if len(stderr) > 8<<10 {
		t.Errorf("%d bytes of log for a 10 MB expression:\n%.400s", len(stderr), stderr)
	}
	for _, l := range strings.Split(stderr, "\n") {
		if len(l) > 2048 {
			t.Errorf("a log line of %d bytes: %.300s", len(l), l)
		}
	}
	t.Logf("%d bytes of log:\n%.600s", len(stderr), stderr)
}

// TestFetchFIFORefused: fetch --mmv of a FIFO answers at once (it used to
// wait for a writer forever).
func TestFetchFIFORefused(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "app")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	code, stderr := runCLI(t, nil, "fetch", "--mmv", fifo)
	if code != 1 || !strings.Contains(stderr, fifo+": not a regular file (a FIFO)") {
		t.Errorf("fetch --mmv FIFO: exit %d: %s", code, stderr)
	}
}

package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"

	"github.com/pcp-exporter/pcp-exporter/bridge/backfill"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
	"google.golang.org/protobuf/encoding/protowire"
)

// TestBackfillSIGINT interrupts a remote-write backfill whose receiver
// stores two requests and then hangs: the command ends within a second of
// SIGINT, and its summary counts as written what the receiver holds.
func TestBackfillSIGINT(t *testing.T) {
	var mu sync.Mutex
	requests, held := 0, 0
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		raw, err := snappy.Decode(nil, body)
		samples := 0
		if err == nil {
			samples, err = countSamples(raw)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		requests++
		n := requests
		if n <= 2 {
			held += samples
		}
		mu.Unlock()
		if n > 2 {
			select {
			case <-hang:
			case <-time.After(10 * time.Second):
			}
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	defer close(hang)
	f := &backfillFlags{archives: []string{filepath.Join(corpus, "archives", "live/live")}, output: "remote-write:" + srv.URL + "/api/v1/write", naming: "default", quiet: true, timeout: time.Minute}
	var stderr bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- runBackfill(f, &stderr) }()
	for {
		mu.Lock()
		n := requests
		mu.Unlock()
		if n >= 3 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("backfill ended before the receiver hung: %v\n%s", err, stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	sent := time.Now()
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("SIGINT ignored for 5 s")
	}
	if took := time.Since(sent); took > time.Second {
		t.Errorf("ended %v after SIGINT", took)
	}
	if err == nil || err.Error() != "interrupted" {
		t.Errorf("err = %v, want interrupted", err)
	}
	out := stderr.String()
	if want := " " + strconv.Itoa(held) + " written (accepted by remote-write)"; held != 8192 || !strings.Contains(out, want) {
		t.Errorf("the receiver holds %d samples; summary:\n%s", held, out)
	}
}

// TestBackfillLabelsAndTempFiles writes an OpenMetrics file with --label:
// every sample carries the labels, the temporary files are made in the
// output's directory (none in $TMPDIR), and those a killed run left there
// are removed.
func TestBackfillLabelsAndTempFiles(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dir := t.TempDir()
	// the pid of a process that has ended
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, ".pcp-exporter-om-"+strconv.Itoa(dead.Process.Pid)+"-12345")
	if err := os.WriteFile(stale, []byte("left by a killed run"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.om")
	f := &backfillFlags{archives: []string{filepath.Join(corpus, "archives", "seedtables/seedtables")}, output: "openmetrics:" + out, naming: "default", quiet: true,
		labels: []string{"job=pcp", "instance=host:9100"}}
	var stderr bytes.Buffer
	if err := runBackfill(f, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		n++
		if !strings.Contains(line, `instance="host:9100"`) || !strings.Contains(line, `job="pcp"`) {
			t.Fatalf("sample without the labels: %s", line)
		}
	}
	if n == 0 {
		t.Fatal("no sample")
	}
	if ents, _ := os.ReadDir(tmp); len(ents) > 0 {
		t.Errorf("%d files left in $TMPDIR", len(ents))
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != "out.om" {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("output directory holds %v, want only out.om", names)
	}
	for _, bad := range []string{"job", "__name__=x", "0job=x", "job=", "job=a"} {
		f := &backfillFlags{archives: f.archives, output: f.output, naming: "default", quiet: true, labels: []string{bad}}
		if bad == "job=a" {
			f.labels = append(f.labels, "job=b")
		}
		if err := runBackfill(f, io.Discard); err == nil || !strings.Contains(err.Error(), "--label") {
			t.Errorf("--label %s: err = %v", bad, err)
		}
	}
}

// countSamples counts the samples of a remote-write WriteRequest (field 2
// of each TimeSeries, field 1).
func countSamples(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		_, _, k := protowire.ConsumeTag(b)
		if k < 0 {
			return 0, protowire.ParseError(k)
		}
		ts, m := protowire.ConsumeBytes(b[k:])
		if m < 0 {
			return 0, protowire.ParseError(m)
		}
		b = b[k+m:]
		for len(ts) > 0 {
			num, typ, k := protowire.ConsumeTag(ts)
			if k < 0 {
				return 0, protowire.ParseError(k)
			}
			m := protowire.ConsumeFieldValue(num, typ, ts[k:])
			if m < 0 {
				return 0, protowire.ParseError(m)
			}
			if num == 2 {
				n++
			}
			ts = ts[k+m:]
		}
	}
	return n, nil
}

// TestBackfillKilledLeavesNoTempFiles SIGKILLs a process writing an
// OpenMetrics backfill while its temporary files exist (its output is a
// pipe nobody reads), then reruns the backfill into the same directory:
// the killed run's files are removed.
func TestBackfillKilledLeavesNoTempFiles(t *testing.T) {
	if dir := os.Getenv("PCPX_KILLED_BACKFILL_DIR"); dir != "" {
		as, err := pcplog.OpenAll([]string{filepath.Join(corpus, "archives", "live/live")})
		if err != nil {
			t.Fatal(err)
		}
		r, w, err := os.Pipe() // never read: the copy blocks
		if err != nil {
			t.Fatal(err)
		}
		_, err = backfill.WriteOpenMetrics(context.Background(), backfill.Options{Archives: as, TempDir: dir}, w, false)
		r.Close()
		t.Fatalf("the write to a pipe nobody reads returned: %v", err)
	}
	dir := t.TempDir()
	child := exec.Command(os.Args[0], "-test.run=^TestBackfillKilledLeavesNoTempFiles$")
	child.Env = append(os.Environ(), "PCPX_KILLED_BACKFILL_DIR="+dir)
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	temps := func() int {
		m, _ := filepath.Glob(filepath.Join(dir, ".pcp-exporter-om-*"))
		return len(m)
	}
	deadline := time.Now().Add(20 * time.Second)
	for temps() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the child made no temporary file")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // into the blocked copy
	child.Process.Signal(syscall.SIGKILL)
	child.Wait()
	left := temps()
	if left == 0 {
		t.Fatal("the killed run left no temporary file: nothing to clean")
	}
	out := filepath.Join(dir, "out.om")
	f := &backfillFlags{archives: []string{filepath.Join(corpus, "archives", "seedtables/seedtables")}, output: "openmetrics:" + out, naming: "default", quiet: true}
	if err := runBackfill(f, io.Discard); err != nil {
		t.Fatal(err)
	}
	if n := temps(); n != 0 {
		t.Errorf("%d of the killed run's %d temporary files remain after a rerun", n, left)
	}
	t.Logf("the killed run left %d temporary files; the rerun removed them", left)
}

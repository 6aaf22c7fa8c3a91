package main

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
)

// Archives libpcp reads in part (issue 37 items 5 and 6).

// TestReplayRefusesContradictoryEncoding: PCP's QA logsummary-bug logs a
// U32 counter in 64-bit value blocks. In testdata/pcp-qa, TZ=UTC
// `pmval -a logsummary-bug -t 5sec kernel.all.cpu.wait.total` prints no
// value and "pmval: pmFetch: Corrupted record in a PCP archive log", exit
// status 1; replay did print 0, 0, 0.
func TestReplayRefusesContradictoryEncoding(t *testing.T) {
	code, out := runMain(t, nil, "replay", filepath.Join("..", "..", "testdata", "pcp-qa", "logsummary-bug"), "--interval=5s", "--interp=prior", "kernel.all.cpu.wait.total")
	if code != 1 || !strings.Contains(out, "Corrupted record in a PCP archive log") || strings.Contains(out, "kernel.all.cpu.wait.total,") {
		t.Errorf("exit %d, want 1 with Corrupted record and no value:\n%s", code, out)
	}
}

// zeroTailed makes the copy the issue describes: the corpus's live_v3
// with 4096 zero bytes after its last record (a crashed pmlogger's tail),
// in a new directory; it returns the base name and the zeros' offset.
func zeroTailed(t *testing.T) (string, int64) {
	t.Helper()
	src := filepath.Join("..", "..", "testdata", "pcp-corpus", "archives", "live", "live_v3")
	dir := t.TempDir()
	base := filepath.Join(dir, "z")
	for _, ext := range []string{".meta", ".index", ".0"} {
		b, err := os.ReadFile(src + ext)
		if err != nil {
			t.Fatal(err)
		}
		if ext == ".0" {
			b = append(b, make([]byte, 4096)...)
		}
		if err := os.WriteFile(base+ext, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fi, _ := os.Stat(src + ".0")
	return base, fi.Size()
}

// TestZeroTailedVolume: a volume ending in zeros (`cp live_v3.meta z.meta;
// cp live_v3.index z.index; (cat live_v3.0; head -c 4096 /dev/zero) > z.0`).
// libpcp reads every record before the zeros: TZ=UTC `pmdumplog z` prints
// the 208 records of live_v3, then "pmFetch: Corrupted record in a PCP
// archive log"; `pmval -a z -t 10sec -S +2.5 mem.util.free` prints the values
// live_v3's do (testdata/pcp-corpus/archives/live/expected/pmval/
// live_v3.t10-S2.5.mem.util.free.pmval.txt; -t 10sec from the start meets the
// zeros: "Corrupted record" after the values). dump and
// replay give what they give on live_v3, then one warning naming z.0 and
// the zeros' offset; serve serves it, with one warning. Before, each
// refused the archive ("record length 0 out of range") and printed nothing.
func TestZeroTailedVolume(t *testing.T) {
	base, off := zeroTailed(t)
	orig := filepath.Join("..", "..", "testdata", "pcp-corpus", "archives", "live", "live_v3")
	where := "z.0: offset " + strconv.FormatInt(off, 10) + ": zeros"

	// dump: the records of live_v3, then the error
	var want, got bytes.Buffer
	if err := dumpArchive(&want, orig); err != nil {
		t.Fatal(err)
	}
	err := dumpArchive(&got, base)
	if err == nil || !strings.Contains(err.Error(), where) {
		t.Errorf("dump: %v, want the zeros at offset %d", err, off)
	}
	if n := bytes.Count(got.Bytes(), []byte("\n")); n != 208 || !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Errorf("dump: %d lines, want live_v3's 208 (pmdumplog)", n)
	}

	// replay: live_v3's values (libpcp's: pmval), then one warning
	pmval, err := os.ReadFile(filepath.Join("..", "..", "testdata", "pcp-corpus", "archives", "live", "expected", "pmval", "live_v3.t10-S2.5.mem.util.free.pmval.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var libpcp []string
	sc := bufio.NewScanner(bytes.NewReader(pmval))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && strings.Count(f[0], ":") == 2 {
			libpcp = append(libpcp, f[1])
		}
	}
	code, out := runMain(t, []string{"TZ=UTC"}, "replay", base, "--start=+2.5s", "--interval=10s", "--interp=prior", "mem.util.free")
	var ours []string
	warnings := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "warning") {
			warnings++
			if !strings.Contains(l, where) {
				t.Errorf("replay warning %q does not name %s", l, where)
			}
		}
		if f := strings.Split(l, ","); len(f) == 5 && f[1] == "mem.util.free" {
			ours = append(ours, f[4])
		}
	}
	if code != 0 || warnings != 1 || len(libpcp) < 10 || strings.Join(ours, " ") != strings.Join(libpcp, " ") {
		t.Errorf("replay: exit %d, %d warnings; values %v, libpcp %v\n%s", code, warnings, ours, libpcp, out)
	}

	// serve (a finished archive: replayed) serves it, one warning
	addr := e2e.FreeAddr(t)
	base2 := "http://" + addr
	log := startExporter(t, http.DefaultClient, base2, "serve", "--web.listen-address="+addr, "--archive="+base, "--replay.start=+5s")
	resp, err := http.Get(base2 + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(body, []byte("\nmem_util_free_bytes ")) {
		t.Errorf("serve: no mem_util_free_bytes\n%s", grepLines(string(body), "pcp_exporter_source"))
	}
	time.Sleep(100 * time.Millisecond)
	if n := strings.Count(log.String(), "archive ends early"); n != 1 || !strings.Contains(log.String(), where) {
		t.Errorf("serve: %d warnings, want one naming %s:\n%s", n, where, log)
	}
}

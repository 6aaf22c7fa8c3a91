package backfill

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTextfile: a run's metrics file for node_exporter's textfile
// collector: the outcome of each sample, the rejections and skips by
// reason, success; a failed run keeps the time of the last success; the
// file is replaced whole (no temporary file left); only NAME.prom paths in
// an existing directory are taken.
func TestTextfile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "nightly.prom")
	t0 := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	ok := Stats{Read: 100, Written: 100, Skipped: map[string]int64{"metric_default_off": 4}, RejectedBy: map[string]int64{}}
	if err := WriteTextfile(path, ok, t0, t0.Add(2*time.Second), nil); err != nil {
		t.Fatal(err)
	}
	bad := Stats{Read: 100, Written: 40, Rejected: 60, RejectedBy: map[string]int64{"out of bounds": 50, "HTTP 400": 10}, Skipped: map[string]int64{}}
	if err := WriteTextfile(path, bad, t0.Add(time.Hour), t0.Add(time.Hour+time.Second), errors.New("60 samples were rejected")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`pcp_exporter_backfill_last_run_success{backfill="nightly"} 0`,
		`pcp_exporter_backfill_last_run_samples{backfill="nightly",outcome="read"} 100`,
		`pcp_exporter_backfill_last_run_samples{backfill="nightly",outcome="written"} 40`,
		`pcp_exporter_backfill_last_run_samples{backfill="nightly",outcome="rejected"} 60`,
		`pcp_exporter_backfill_last_run_rejected_samples{backfill="nightly",reason="out of bounds"} 50`,
		`pcp_exporter_backfill_last_run_rejected_samples{backfill="nightly",reason="HTTP 400"} 10`,
		`pcp_exporter_backfill_last_run_timestamp_seconds{backfill="nightly"} 1.795752001e+09`,
		`pcp_exporter_backfill_last_run_duration_seconds{backfill="nightly"} 1`,
		// the first run's end, 2026-11-27T03:00:02Z (date -u -d ... +%s: 1795748402)
		`pcp_exporter_backfill_last_success_timestamp_seconds{backfill="nightly"} 1.795748402e+09`,
	} {
		if !strings.Contains(string(b), want+"\n") {
			t.Errorf("no %s in\n%s", want, b)
		}
	}
	if strings.Contains(string(b), "metric_default_off") {
		t.Errorf("the first run's skips are still there:\n%s", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d files in the directory, want the .prom file alone", len(ents))
	}
	for _, p := range []string{filepath.Join(dir, "nightly.txt"), filepath.Join(dir, ".prom"), filepath.Join(dir, "no", "x.prom")} {
		if CheckTextfile(p) == nil {
			t.Errorf("%s taken", p)
		}
	}
	if err := CheckTextfile(path); err != nil {
		t.Error(err)
	}
}

package bridge

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source/mmv"
	"github.com/pcp-exporter/pcp-exporter/source/mmv/mmvwrite"
)

// TestNameClashLoggedOnce: an MMV file whose metrics "a.b" and "a_b" both
// map to mmv_x_a_b, in a directory where another file comes and goes (each
// scrape remaps the directory), logs the clash once, not once per scrape
// (2,768 times per metric in 10 minutes of churn in the issue).
func TestNameClashLoggedOnce(t *testing.T) {
	dir := t.TempDir()
	cfg := mmvwrite.Config{Metrics: []mmvwrite.MetricDef{
		{Name: "a.b", Item: 1, Type: mmvwrite.TypeU64, Sem: semantics.SemInstant},
		{Name: "a_b", Item: 2, Type: mmvwrite.TypeU64, Sem: semantics.SemInstant},
	}}
	w, err := mmvwrite.New(filepath.Join(dir, "x"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	d, err := mmv.OpenDir(dir, mmv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var logs bytes.Buffer
	c := New(mapper(t, 0), slog.New(slog.NewTextHandler(&logs, nil)), Source{Name: dir, Src: d})
	const scrapes = 40
	for i := range scrapes {
		churn := filepath.Join(dir, "churn")
		if i%2 == 0 {
			writeValue(t, churn, uint64(i)).Close()
		} else if err := os.Remove(churn); err != nil {
			t.Fatal(err)
		}
		text := string(exposition(t, c))
		if !strings.Contains(text, "pcp_exporter_metrics_skipped") {
			t.Fatalf("scrape %d: no skipped metric reported:\n%s", i, text)
		}
	}
	n := strings.Count(logs.String(), "name clash")
	t.Logf("%d scrapes, %d name-clash lines:\n%s", scrapes, n, logs.String())
	if n != 1 {
		t.Errorf("%d name-clash lines, want 1", n)
	}
}

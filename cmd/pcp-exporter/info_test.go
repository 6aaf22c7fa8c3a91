package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/pcp-exporter/pcp-exporter/source/archive"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestInfoGolden checks info's JSON for archives of each kind against golden
// files (our output; the content itself is checked against pminfo by the
// archive package's corpus tests).
func TestInfoGolden(t *testing.T) {
	for _, name := range []string{"types/types", "types/types_v3", "indoms/indoms_v3", "mmvchurn/mmvchurn_v3", "compressed/multivol_xz"} {
		t.Run(name, func(t *testing.T) {
			a, err := archive.Open(filepath.Join(corpus, "archives", name))
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := writeInfo(&out, a); err != nil {
				t.Fatal(err)
			}
			var list []map[string]any
			if err := json.Unmarshal(out.Bytes(), &list); err != nil || len(list) == 0 {
				t.Fatalf("not a JSON list of metrics: %v", err)
			}
			for _, m := range list {
				for _, k := range []string{"name", "pmid", "type", "sem", "indom", "units", "oneline", "help", "labels", "instances"} {
					if _, ok := m[k]; !ok {
						t.Fatalf("%v: no %q", m["name"], k)
					}
				}
			}
			golden := filepath.Join("testdata", "info", filepath.Base(name)+".json")
			if *update {
				os.MkdirAll(filepath.Dir(golden), 0o755)
				if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out.Bytes(), want) {
				t.Errorf("info output differs from %s (run with -update after checking)", golden)
			}
		})
	}
}

func TestCommandErrors(t *testing.T) {
	if got := run([]string{"dump", filepath.Join(t.TempDir(), "nope")}); got != 1 {
		t.Errorf("dump of a missing archive: exit %d, want 1", got)
	}
	if got := run([]string{"info"}); got != 2 {
		t.Errorf("info without source: exit %d, want 2", got)
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestInfoGolden checks info's JSON for archives of each kind against golden
// files (our output; the content itself is checked against pminfo by the
// archive package's corpus tests).
func TestInfoGolden(t *testing.T) {
	for _, name := range []string{"types/types", "types/types_v3", "indoms/indoms_v3", "mmvchurn/mmvchurn_v3", "compressed/multivol_xz"} {
		t.Run(name, func(t *testing.T) {
			a, err := pcplog.Open(filepath.Join(corpus, "archives", name))
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

// TestInfoDerivedMatchesPminfo runs `info --derived.config` over the corpus
// archives and compares the derived metrics' descriptors with pminfo -dmT's
// answers (PMID, type, semantics, units, indom).
func TestInfoDerivedMatchesPminfo(t *testing.T) {
	t.Parallel()
	typeWord := map[string]string{"32-bit int": "32", "32-bit unsigned int": "u32", "64-bit int": "64", "64-bit unsigned int": "u64", "float": "float", "double": "double", "string": "string"}
	b, err := os.ReadFile(filepath.Join(corpus, "manifest.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		c := strings.Split(line, "\t")
		if len(c) < 6 || c[1] != "pminfo" || c[4] != "PCP_DERIVED_CONFIG=derived/derived.conf" || !strings.Contains(c[2], "-dmT") {
			continue
		}
		n++
		t.Run(filepath.Base(c[3]), func(t *testing.T) {
			a, err := pcplog.Open(filepath.Join(corpus, c[0]))
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			d := &derivedFlags{config: filepath.Join(corpus, "derived", "derived.conf")}
			ms, err := d.describe(a.Metrics(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := writeInfo(&out, describedSource{a, ms}); err != nil {
				t.Fatal(err)
			}
			var got []struct {
				Name, PMID, Type, Sem, Units string
				InDom                        *string
			}
			if err := json.Unmarshal(out.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			byName := map[string]int{}
			for i, m := range got {
				byName[m.Name] = i
			}
			exp, err := os.ReadFile(filepath.Join(corpus, c[3]))
			if err != nil {
				t.Fatal(err)
			}
			checked := 0
			for _, block := range strings.Split(string(exp), "\n\n") {
				lines := strings.Split(strings.TrimSpace(block), "\n")
				if len(lines) < 3 || !strings.Contains(lines[0], " PMID: ") {
					continue
				}
				name, pmid, _ := strings.Cut(lines[0], " PMID: ")
				typ := strings.TrimSpace(strings.TrimPrefix(strings.Split(lines[1], "  InDom: ")[0], "    Data Type: "))
				indom := strings.Fields(strings.Split(lines[1], "  InDom: ")[1])[0]
				sem, units, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(lines[2]), "Semantics: "), "  Units: ")
				if units == "none" {
					units = ""
				}
				i, ok := byName[name]
				if !ok {
					t.Errorf("%s: not in info's output", name)
					continue
				}
				m := got[i]
				gotIndom := "PM_INDOM_NULL"
				if m.InDom != nil {
					gotIndom = *m.InDom
				}
				if m.PMID != pmid || m.Type != typeWord[typ] || m.Sem != sem || m.Units != units || gotIndom != indom {
					t.Errorf("%s: info says %s %s %s %q %s; pminfo %s %s %s %q %s", name, m.PMID, m.Type, m.Sem, m.Units, gotIndom, pmid, typeWord[typ], sem, units, indom)
				}
				checked++
			}
			if checked == 0 {
				t.Error("no descriptor checked")
			}
		})
	}
	if n == 0 {
		t.Fatal("no pminfo -dmT answers with derived.conf")
	}
}

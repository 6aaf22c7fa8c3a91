package mmv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// FuzzFile feeds arbitrary bytes to the reader as an MMV file: opening,
// listing metadata and fetching must never panic, hang or allocate without
// bound, and errors must name the file.
//
// Run it with -fuzzminimizetime 10s: an execution writes, maps and scans a
// file twice (about 0.3 ms), so the worker minimizing a new interesting
// input of several kB spends the default 60 s on it, during which the
// coordinator reports "0 execs/sec" (the stall seen in an earlier run;
// testdata/fuzz/FuzzFile/329bce91255a1535 is such an input: it passes). A
// file whose generations disagree is retried fluxRetries times (set to 0
// here), then reported as in flux: never an endless loop.
func FuzzFile(f *testing.F) {
	for _, name := range []string{"corpusv1", "corpusv2", "corpusv3", "corpussentinel"} {
		b, err := os.ReadFile(filepath.Join(corpusDir, "files", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	small := filepath.Join(f.TempDir(), "small")
	w, err := NewWriter(small, BigConfig(3, 2))
	if err != nil {
		f.Fatal(err)
	}
	b, _ := os.ReadFile(small)
	w.Close()
	f.Add(b)
	f.Add([]byte("MMV\x00"))

	fluxRetries = 0
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, fmt.Sprintf("f%d", os.Getpid()))
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(path)
		file, err := OpenFile(path, Options{})
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file", err)
			}
			return
		}
		defer file.Close()
		exercise(t, file)
		d, err := OpenDir(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		exercise(t, d)
	})
}

func exercise(t *testing.T, src source.Source) {
	var pmids []semantics.PMID
	for _, m := range src.Metrics() {
		pmids = append(pmids, m.Desc.PMID)
		if m.Desc.InDom != semantics.InDomNull {
			src.Instances(m.Desc.InDom)
		}
	}
	pmids = append(pmids, semantics.NewPMID(Domain, 1, 1023))
	var res source.Result
	for i := 0; i < 2; i++ {
		if err := src.Fetch(time.Time{}, pmids, &res); err != nil {
			t.Fatal(err)
		}
	}
}

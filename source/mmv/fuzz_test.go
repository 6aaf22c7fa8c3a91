package mmv

import (
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/mmv/mmvwrite"
)

// FuzzFile feeds arbitrary bytes to the reader as an MMV file: opening,
// listing metadata and fetching must never panic, hang or allocate without
// bound, and errors must name the file.
//
// Each input is decoded in memory (as load does after mmap); one in eight
// also goes through a real file and a directory.
//
// The "0 execs/sec" stretches of earlier runs were not a hang: when the
// worker finds a new interesting input it minimizes it before reporting,
// and Go's minimizer tries removing every byte range (quadratic in the
// input's size), so a several-kB MMV input always uses the whole
// -fuzzminimizetime (60 s by default) while the coordinator's exec count
// stands still (testdata/fuzz/FuzzFile/329bce91255a1535 is such an input;
// it passes in microseconds). Add -fuzzminimizetime 5s to fuzz more. A
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
	w, err := mmvwrite.New(small, BigConfig(3, 2))
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
		// In memory: the decoder and the value reads proper, as load runs
		// them once the file is mapped (no system calls: fast enough for
		// the fuzzer to explore and minimize).
		if len(data) >= headerSize {
			m := &mapping{path: "fuzzed", name: "fuzzed", data: append(make([]byte, 0, len(data)), data...), disk: uint64(len(data))}
			if err := m.checkHeader(false); err != nil {
				if !strings.Contains(err.Error(), "fuzzed") {
					t.Errorf("error %q does not name the file", err)
				}
			} else {
				exerciseView(buildView([]*loaded{{mapping: m, cluster: 1}}, nil))
			}
		}
		// Through a real file and a directory (mmap, reloads) for one
		// input in eight.
		if crc32.ChecksumIEEE(data)%8 != 0 {
			return
		}
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

// exerciseView lists what a view exports and reads every value twice.
func exerciseView(v *view) {
	var pmids []semantics.PMID
	for _, m := range v.metricList() {
		pmids = append(pmids, m.Desc.PMID)
		if m.Desc.InDom != semantics.InDomNull {
			v.instances(m.Desc.InDom)
		}
	}
	pmids = append(pmids, semantics.NewPMID(Domain, 1, 1023))
	var res source.Result
	prepare(&res, len(pmids))
	for i := 0; i < 2; i++ {
		v.fill(pmids, &res, time.Now())
	}
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

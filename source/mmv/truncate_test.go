package mmv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/mmv/mmvwrite"
)

// TestTruncatedUnderTheReader: a file cut short while mapped (by a writer
// that truncates instead of re-creating, or by anyone with write access)
// gives an error naming the file, never a crash: reads beyond the new end
// of a mapping raise SIGBUS.
func TestTruncatedUnderTheReader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big")
	w, err := mmvwrite.New(path, BigConfig(100, 50))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, open := range []func() (source.Source, error){
		func() (source.Source, error) { return OpenFile(path, Options{}) },
		func() (source.Source, error) { return OpenDir(filepath.Dir(path), Options{}) },
	} {
		src, err := open()
		if err != nil {
			t.Fatal(err)
		}
		ms := src.Metrics()
		pmids := make([]semantics.PMID, len(ms))
		for i, m := range ms {
			pmids[i] = m.Desc.PMID
		}
		var res source.Result
		if err := src.Fetch(time.Now(), pmids, &res); err != nil {
			t.Fatal(err)
		}
		full, _ := os.Stat(path)
		if err := os.Truncate(path, 4096); err != nil {
			t.Fatal(err)
		}
		if err := src.Fetch(time.Now(), pmids, &res); err != nil {
			t.Errorf("%T: fetch after truncation: %v", src, err)
		}
		vals := 0
		for _, s := range res.Sets {
			vals += len(s.Values)
		}
		if vals != 0 {
			t.Errorf("%T: %d values from a file cut to 4096 bytes", src, vals)
		}
		var st FileStatus
		switch s := src.(type) {
		case *File:
			st = s.Status()
		case *Dir:
			st = s.Files()[0]
		}
		if st.Path != path || !strings.Contains(strings.Join(st.Problems, "; "), "exceeds the file size 4096") {
			t.Errorf("%T: status after truncation: %+v", src, st)
		}
		src.Close()
		if err := os.Truncate(path, full.Size()); err != nil {
			t.Fatal(err)
		}
	}
}

package mmv

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/mmv/mmvwrite"
)

func oneMetric(cluster uint32, flags Flags, name string) mmvwrite.Config {
	return mmvwrite.Config{Cluster: cluster, Flags: flags, Metrics: []mmvwrite.MetricDef{{Name: name, Item: 1, Type: TypeU64, Sem: semCounter}}}
}

func write(t *testing.T, path string, cfg mmvwrite.Config, v uint64) *mmvwrite.Writer {
	t.Helper()
	w, err := mmvwrite.New(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.MustHandle(cfg.Metrics[0].Name, "").SetUint64(v)
	t.Cleanup(func() { w.Close() })
	return w
}

// exported lists "name pmid=value" for every metric of src.
func exported(t *testing.T, src source.Source) string {
	t.Helper()
	ms := src.Metrics()
	var ids []semantics.PMID
	for _, m := range ms {
		ids = append(ids, m.Desc.PMID)
	}
	var res source.Result
	if err := src.Fetch(time.Time{}, ids, &res); err != nil {
		t.Fatal(err)
	}
	var out []string
	for i, m := range ms {
		s := m.Name + " " + m.Desc.PMID.String()
		for _, v := range res.Sets[i].Values {
			s += "=" + string(semantics.AppendJSON(nil, v.Value))
		}
		out = append(out, s)
	}
	return strings.Join(out, "; ")
}

// TestDirLifecycle follows a directory whose files appear, disappear and
// are replaced, with pmdammv's naming and cluster assignment.
func TestDirLifecycle(t *testing.T) {
	dir := t.TempDir()
	var logs bytes.Buffer
	d, err := OpenDir(dir, Options{PIDCheck: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	step := func(what, want string) {
		t.Helper()
		if got := exported(t, d); got != want {
			t.Errorf("%s:\n got %s\nwant %s", what, got, want)
		}
	}
	step("empty directory", "")

	write(t, filepath.Join(dir, "beta"), oneMetric(0, 0, "b"), 2)
	write(t, filepath.Join(dir, "alpha"), oneMetric(0, 0, "a"), 1)
	write(t, filepath.Join(dir, "gamma"), oneMetric(5, FlagNoPrefix, "gamma_np.g"), 3)
	write(t, filepath.Join(dir, ".hidden"), oneMetric(0, 0, "h"), 9)
	os.Mkdir(filepath.Join(dir, "subdir"), 0o755)
	// Clusters are assigned in name order, lowest unused first.
	step("three files", "mmv.alpha.a 70.1.1=1; mmv.beta.b 70.2.1=2; mmv.gamma_np.g 70.5.1=3")

	// pmdammv rejects every name of a file whose name has a '-'; the file
	// still takes a cluster number, as in pmdammv.
	write(t, filepath.Join(dir, "al-pha"), oneMetric(0, 0, "x"), 4)
	step("bad file name", "mmv.alpha.a 70.2.1=1; mmv.beta.b 70.3.1=2; mmv.gamma_np.g 70.5.1=3")
	var bad FileStatus
	for _, s := range d.Files() {
		if s.Name == "al-pha" {
			bad = s
		}
	}
	if bad.Exported || !strings.Contains(bad.Reason, "'-'") {
		t.Errorf("al-pha: %+v, want a skipped file naming the '-'", bad)
	}
	if !strings.Contains(logs.String(), "al-pha") {
		t.Errorf("the skipped file was not logged:\n%s", logs.String())
	}
	os.Remove(filepath.Join(dir, "al-pha"))

	// A file goes away: the others' PMIDs change, as in pmdammv.
	os.Remove(filepath.Join(dir, "alpha"))
	step("alpha removed", "mmv.beta.b 70.1.1=2; mmv.gamma_np.g 70.5.1=3")

	// A file is replaced (new generation, new metrics).
	write(t, filepath.Join(dir, "beta"), mmvwrite.Config{Metrics: []mmvwrite.MetricDef{{Name: "b2", Item: 7, Type: TypeU64, Sem: semCounter}}}, 20)
	step("beta replaced", "mmv.beta.b2 70.1.7=20; mmv.gamma_np.g 70.5.1=3")

	// A file rewritten in place gets a new generation.
	w := write(t, filepath.Join(dir, "delta"), oneMetric(0, 0, "d"), 5)
	step("delta added", "mmv.beta.b2 70.1.7=20; mmv.delta.d 70.2.1=5; mmv.gamma_np.g 70.5.1=3")
	data := mapped(t, w.Path())
	gen := ne.Uint64(data[8:])
	g2 := (*uint64)(unsafe.Pointer(&data[16]))
	atomic.StoreUint64(g2, 0)
	step("delta in flux", "mmv.beta.b2 70.1.7=20; mmv.gamma_np.g 70.5.1=3")
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&data[8])), gen+1)
	atomic.StoreUint64(g2, gen+1)
	step("delta published again", "mmv.beta.b2 70.1.7=20; mmv.delta.d 70.2.1=5; mmv.gamma_np.g 70.5.1=3")

	// Duplicate header clusters collide: the PMID resolves to the first
	// file in name order, the later name aliases it.
	write(t, filepath.Join(dir, "epsilon"), oneMetric(5, 0, "e"), 6)
	step("duplicate cluster", "mmv.beta.b2 70.1.7=20; mmv.delta.d 70.2.1=5; mmv.epsilon.e 70.5.1=6; mmv.gamma_np.g 70.5.1=6")

	var names []string
	for _, s := range d.Files() {
		names = append(names, s.Name)
		if s.Generation.IsZero() || s.Generation.After(time.Now()) {
			t.Errorf("%s: generation %v", s.Name, s.Generation)
		}
	}
	if !sort.StringsAreSorted(names) || strings.Join(names, " ") != "beta delta epsilon gamma" {
		t.Errorf("files %v", names)
	}
	if g := d.Generation(semantics.NewPMID(Domain, 2, 1)); !g.Equal(w.Generation().Add(time.Microsecond)) {
		t.Errorf("generation of delta %v, want %v", g, w.Generation().Add(time.Microsecond))
	}
}

// TestDirMissing checks that a directory that does not exist yet exports
// nothing until it appears.
func TestDirMissing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mmv")
	d, err := OpenDir(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got := exported(t, d); got != "" {
		t.Fatalf("missing directory exports %q", got)
	}
	os.Mkdir(dir, 0o755)
	write(t, filepath.Join(dir, "late"), oneMetric(0, 0, "x"), 1)
	if got := exported(t, d); got != "mmv.late.x 70.1.1=1" {
		t.Fatalf("after the directory appeared: %q", got)
	}
	if _, err := OpenDir(filepath.Join(dir, "late"), Options{}); err == nil {
		t.Errorf("OpenDir of a regular file succeeded")
	}
}

// TestDirFileWrittenLate follows a file that a writer creates and fills in
// steps (open, ftruncate, header), as libpcp_mmv's mmv_init does: once the
// file exists, filling it changes neither the directory's mtime nor, after
// ftruncate, the file's size, so nothing but the file itself shows it.
func TestDirFileWrittenLate(t *testing.T) {
	src := filepath.Join(t.TempDir(), "late")
	write(t, src, oneMetric(0, 0, "x"), 42)
	content, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		first []byte // what the file holds when first seen
	}{
		{"empty", nil},
		{"zeros", make([]byte, len(content))},
		{"half a header", content[:20]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "late")
			if err := os.WriteFile(path, tc.first, 0o644); err != nil {
				t.Fatal(err)
			}
			// the directory changed long ago, as far as its mtime tells
			old := time.Now().Add(-time.Minute)
			if err := os.Chtimes(dir, old, old); err != nil {
				t.Fatal(err)
			}
			d, err := OpenDir(dir, Options{Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if got := exported(t, d); got != "" {
				t.Fatalf("before the write: %s", got)
			}
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt(content, 0); err != nil {
				t.Fatal(err)
			}
			f.Close()
			if err := os.Chtimes(dir, old, old); err != nil {
				t.Fatal(err)
			}
			if got, want := exported(t, d), "mmv.late.x 70.1.1=42"; got != want {
				t.Errorf("after the write: got %q, want %q", got, want)
			}
		})
	}
}

// TestDirStatusMissing: a directory that does not exist is reported
// missing, naming it, until it is created (and read again: Status answers
// from the last read, without I/O).
func TestDirStatusMissing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mmv")
	d, err := OpenDir(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if st := source.StatusOf(d, time.Now()); st.Reason != source.ReasonMissing || !strings.Contains(st.Detail, dir) {
		t.Errorf("missing directory: %+v", st)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	d.Metrics()
	if st := source.StatusOf(d, time.Now()); st.Reason != source.ReasonUp {
		t.Errorf("created directory: %+v", st)
	}
}

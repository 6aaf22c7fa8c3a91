package mmv

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// Tests of a directory shared with untrusted writers (issue 27 items 1, 8
// and 9): every input is made here, every wait is bounded.

// within runs f and fails the test when it has not returned after d (the
// goroutine is left behind: the test reports the hang instead of hanging).
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
	}
}

func TestFIFORefusedWithoutBlocking(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "app")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	within(t, 5*time.Second, "OpenFile of a FIFO", func() {
		_, err := OpenFile(fifo, Options{})
		if err == nil || !strings.Contains(err.Error(), "not a regular file (a FIFO)") || !strings.Contains(err.Error(), fifo) {
			t.Errorf("OpenFile(FIFO) = %v, want a not-a-regular-file error naming it", err)
		}
	})
	within(t, 5*time.Second, "notYetWritten of a FIFO", func() {
		if notYetWritten(fifo) {
			t.Error("a FIFO looks like an MMV file being written")
		}
	})
	within(t, 5*time.Second, "a directory holding a FIFO", func() {
		d, err := OpenDir(dir, Options{})
		if err != nil {
			t.Error(err)
			return
		}
		defer d.Close()
		if m := d.Metrics(); len(m) != 0 {
			t.Errorf("%d metrics from a FIFO", len(m))
		}
	})
}

// TestFIFORaceNeverBlocks replaces an MMV file by a FIFO and back (rename,
// as a hostile writer sharing the directory can) while the directory is
// read: no read may block (the FIFO used to be opened blocking, under the
// directory's lock, between the stat that saw a regular file and the open).
func TestFIFORaceNeverBlocks(t *testing.T) {
	good, err := os.ReadFile(filepath.Join(corpusDir, "files", "corpusv2"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	name := filepath.Join(dir, "app")
	if err := os.WriteFile(name, good, 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := OpenDir(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// no deferred Close: after a blocked read it would wait for the lock
	// the read holds, and the test would hang instead of failing
	const swaps = 400
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	swapErr := make(chan error, 1)
	go func() {
		defer wg.Done()
		fifo, reg := filepath.Join(dir, ".fifo"), filepath.Join(dir, ".reg")
		for i := 0; i < swaps; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := unix.Mkfifo(fifo, 0o600); err != nil {
				swapErr <- err
				return
			}
			if err := os.Rename(fifo, name); err != nil {
				swapErr <- err
				return
			}
			if err := os.WriteFile(reg, good, 0o644); err != nil {
				swapErr <- err
				return
			}
			if err := os.Rename(reg, name); err != nil {
				swapErr <- err
				return
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	var res source.Result
	deadline := time.Now().Add(20 * time.Second)
	reads := 0
	for wgDone := false; !wgDone && time.Now().Before(deadline); reads++ {
		within(t, 5*time.Second, fmt.Sprintf("read %d of the directory during FIFO swaps", reads), func() {
			ms := d.Metrics()
			pmids := make([]semantics.PMID, len(ms))
			for i, m := range ms {
				pmids[i] = m.Desc.PMID
			}
			if err := d.Fetch(time.Now(), pmids, &res); err != nil && !strings.Contains(err.Error(), "changed generation") {
				t.Errorf("fetch: %v", err)
			}
			d.Files()
		})
		select {
		case err := <-swapErr:
			t.Fatal(err)
		default:
		}
		wgDone = waitTimeout(&wg, 0)
	}
	d.Close()
	t.Logf("%d reads during %d FIFO swaps", reads, swaps)
	if reads < 2 {
		t.Fatalf("only %d reads", reads)
	}
}

func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	c := make(chan struct{})
	go func() { wg.Wait(); close(c) }()
	select {
	case <-c:
		return true
	case <-time.After(d):
		return false
	}
}

// v2 builds the start of an MMV v2 file: header and TOC entries
// (type, count, offset), with generation 1.
func v2(size int, entries ...[3]uint64) []byte {
	b := make([]byte, size)
	copy(b, "MMV\x00")
	put32n(b, 4, 2)
	put64n(b, 8, 1)
	put64n(b, 16, 1)
	put32n(b, 24, uint32(len(entries)))
	for i, e := range entries {
		at := headerSize + tocSize*i
		put32n(b, at, uint32(e[0]))
		put32n(b, at+4, uint32(e[1]))
		put64n(b, at+8, e[2])
	}
	return b
}

// sparse writes head at the start of a file of the given apparent size
// that stores little more than head (the rest is a hole), and returns its
// path and the bytes it stores on disk.
func sparse(t *testing.T, dir, name string, head []byte, size int64) (string, int64) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, head, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, size); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	if disk := st.Blocks * 512; disk < size/64 {
		return p, disk
	}
	t.Skipf("%s: the filesystem does not keep holes (%d bytes on disk of %d)", dir, st.Blocks*512, size)
	return "", 0
}

// lineCounter counts log lines.
type lineCounter struct {
	mu    sync.Mutex
	lines int
	buf   bytes.Buffer
}

func (c *lineCounter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines += bytes.Count(p, []byte{'\n'})
	if c.buf.Len() < 1<<16 {
		c.buf.Write(p)
	}
	return len(p), nil
}

func (c *lineCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lines
}

// TestSparseFilesBounded loads 1 GiB sparse files (a few KiB on disk)
// whose headers claim what the apparent size could hold: memory allocated
// stays a small multiple of the bytes on disk, the load is quick, and the
// warnings are a bounded number of lines, logged once per generation of a
// file in a directory however often the directory is reloaded.
func TestSparseFilesBounded(t *testing.T) {
	const size = 1 << 30
	const page = 4096
	manyTOCs := v2(page)
	put32n(manyTOCs, 24, uint32((size-headerSize)/tocSize))
	// an indom claiming every instance slot of the file
	everySlot := v2(page, [3]uint64{tocInDoms, 1, 128}, [3]uint64{tocValues, 0, 0})
	put32n(everySlot, 128, 1)
	put32n(everySlot, 132, uint32((size-page)/instance2Size))
	put64n(everySlot, 136, page)
	cases := []struct {
		name string
		head []byte
		want string // in the error or the file's problems
	}{
		{"toc_count_fills_file", manyTOCs, "TOC entries, more than 16"},
		{"indom_claims_every_slot", everySlot, "more than the file stores"},
		{"indoms_fill_file", v2(page, [3]uint64{tocInDoms, maxInDoms, page}, [3]uint64{tocValues, 0, 0}), "more than the file stores"},
		{"values_fill_file", v2(page, [3]uint64{tocValues, (size - page) / valueSize, page}, [3]uint64{tocInDoms, 0, 0}), "more than the file stores"},
		// 255 labels in the hole read as zeros: each one a problem
		{"labels_in_hole", v2(page, [3]uint64{tocLabels, maxLabels, page}, [3]uint64{tocValues, 0, 0}), "has no single cluster/indom/item/instances type"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path, disk := sparse(t, dir, "sparse", tc.head, size)
			logs := &lineCounter{}
			opts := Options{Logger: slog.New(slog.NewTextHandler(logs, nil))}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			began := time.Now()
			var got string
			within(t, 30*time.Second, "OpenFile", func() {
				f, err := OpenFile(path, opts)
				if err != nil {
					got = err.Error()
					return
				}
				defer f.Close()
				got = strings.Join(f.Status().Problems, "; ")
			})
			took := time.Since(began)
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d bytes on disk of %d: %d bytes allocated (%.1fx the bytes on disk), %v, %d log lines", disk, size, alloc, float64(alloc)/float64(disk), took, logs.count())
			if !strings.Contains(got, tc.want) {
				t.Errorf("outcome %q, want %q in it", got, tc.want)
			}
			// the budget allows 2x the stored bytes plus 64 KiB of entries,
			// each costing a few times its size once decoded
			if limit := 64*uint64(disk) + 1<<20; alloc > limit {
				t.Errorf("%d bytes allocated for %d bytes on disk, more than %d", alloc, disk, limit)
			}
			if n := logs.count(); n > maxProblems+1 {
				t.Errorf("%d log lines, want at most %d:\n%s", n, maxProblems+1, logs.buf.String())
			}

			// in a directory: reloads (another file comes and goes) log
			// the sparse file's problems no more
			logs = &lineCounter{}
			d, err := OpenDir(dir, Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			first := logs.count()
			for i := range 5 {
				other := filepath.Join(dir, fmt.Sprintf("other%d", i))
				if err := os.WriteFile(other, []byte("not an MMV file, the same at every reload"), 0o644); err != nil {
					t.Fatal(err)
				}
				d.refreshDue()
				within(t, 30*time.Second, "reload", func() { d.Metrics() })
				os.Remove(other)
			}
			// each reload may log the new file once
			if n := logs.count() - first; n > 5 {
				t.Errorf("5 reloads logged %d lines (the sparse file's problems again?):\n%s", n, logs.buf.String())
			}
			if first > maxProblems+1 {
				t.Errorf("first load logged %d lines", first)
			}
		})
	}
}

// refreshDue makes the next read reload the directory (as a directory
// change does once its mtime moves, which may take a clock tick).
func (d *Dir) refreshDue() {
	d.mu.Lock()
	d.reloadDue = true
	d.mu.Unlock()
}

// repeatedInDom builds a v2 file listing the same indom serial n times,
// each entry with one instance of its own (ids 0..n-1, all named "i"),
// and one metric over it: 56 bytes per entry, 3.4 MB for 60,000.
func repeatedInDom(n int) []byte {
	const metricsAt = 40 + 4*tocSize
	stringsAt := metricsAt + metric2Size
	indomsAt := stringsAt + 2*stringSize
	instsAt := indomsAt + n*indomSize
	b := v2(instsAt+n*instance2Size,
		[3]uint64{tocMetrics, 1, uint64(metricsAt)},
		[3]uint64{tocStrings, 2, uint64(stringsAt)},
		[3]uint64{tocInDoms, uint64(n), uint64(indomsAt)},
		[3]uint64{tocInstances, uint64(n), uint64(instsAt)})
	copy(b[stringsAt:], "m")
	copy(b[stringsAt+stringSize:], "i")
	put64n(b, metricsAt, uint64(stringsAt))
	put32n(b, metricsAt+12, uint32(TypeU64))
	put32n(b, metricsAt+16, uint32(semantics.SemCounter))
	put32n(b, metricsAt+24, 7)
	for k := range n {
		at := indomsAt + k*indomSize
		put32n(b, at, 7)
		put32n(b, at+4, 1)
		put64n(b, at+8, uint64(instsAt+k*instance2Size))
		in := instsAt + k*instance2Size
		put64n(b, in, uint64(at))
		put32n(b, in+12, uint32(k))
		put64n(b, in+16, uint64(stringsAt+stringSize))
	}
	return b
}

// TestRepeatedInDomLinear: 60,000 entries of one indom serial (3.4 MB)
// took 4 min 20 s when each entry rebuilt the set of the instances seen so
// far; the decode is linear now (about 0.1 s here; the bound only catches
// a return of the quadratic cost, BenchmarkRepeatedInDom measures it).
func TestRepeatedInDomLinear(t *testing.T) {
	const n = 60000
	p := filepath.Join(t.TempDir(), "repeated")
	if err := os.WriteFile(p, repeatedInDom(n), 0o644); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	within(t, 30*time.Second, "decoding 60,000 entries of one indom", func() {
		f, err := OpenFile(p, Options{})
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		ms := f.Metrics()
		if len(ms) != 1 {
			t.Errorf("%d metrics", len(ms))
			return
		}
		if got := len(f.Instances(ms[0].Desc.InDom)); got != n {
			t.Errorf("%d instances, want %d", got, n)
		}
	})
	t.Logf("%d entries of one indom decoded in %v", n, time.Since(began))
}

// BenchmarkRepeatedInDom reports the cost per indom entry at two sizes: a
// linear decode costs about the same per entry at both.
func BenchmarkRepeatedInDom(b *testing.B) {
	for _, n := range []int{15000, 60000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			p := filepath.Join(b.TempDir(), "repeated")
			if err := os.WriteFile(p, repeatedInDom(n), 0o644); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				f, err := OpenFile(p, Options{})
				if err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/entry")
		})
	}
}

func TestDirMissingStatus(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mmv")
	d, err := OpenDir(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	st := source.StatusOf(d, time.Now())
	if st.Reason != source.ReasonMissing || !strings.Contains(st.Detail, dir) {
		t.Fatalf("status of a missing directory: %+v", st)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	d.Metrics() // a read notices the directory
	if st := source.StatusOf(d, time.Now()); st.Reason != source.ReasonUp {
		t.Fatalf("status once the directory exists: %+v", st)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	d.Metrics()
	if st := source.StatusOf(d, time.Now()); st.Reason != source.ReasonMissing {
		t.Fatalf("status once the directory is gone again: %+v", st)
	}
	if !errors.Is(d.stampErr, os.ErrNotExist) {
		t.Fatalf("stamp error %v", d.stampErr)
	}
}

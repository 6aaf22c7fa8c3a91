package pcplog

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source/archive/internal/archivetest"
)

func repeatStream(t testing.TB, path string, chunk []byte, n int, c archivetest.Compressor) {
	var one bytes.Buffer
	w, err := c(&one)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(chunk); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, bytes.Repeat(one.Bytes(), n), 0o644); err != nil {
		t.Fatal(err)
	}
}

// prependStream puts a compressed stream of b before the content of path.
func prependStream(t testing.TB, path string, b []byte, c archivetest.Compressor) {
	var one bytes.Buffer
	w, err := c(&one)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rest, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(one.Bytes(), rest...), 0o644); err != nil {
		t.Fatal(err)
	}
}

func xzWriter(w io.Writer) (io.WriteCloser, error) { return xz.NewWriter(w) }
func zstdWriter(w io.Writer) (io.WriteCloser, error) {
	return zstd.NewWriter(w, zstd.WithEncoderConcurrency(1))
}

// textRecord is a .meta help text record of a PMID with body bytes of text.
func textRecord(pmid uint32, body int) []byte {
	n := 8 + 8 + body + 1 + 4
	b := binary.BigEndian.AppendUint32(nil, uint32(n))
	b = binary.BigEndian.AppendUint32(b, typeText)
	b = binary.BigEndian.AppendUint32(b, textHelp|textPMID)
	b = binary.BigEndian.AppendUint32(b, pmid)
	b = append(b, bytes.Repeat([]byte{'h'}, body)...)
	b = append(b, 0)
	return binary.BigEndian.AppendUint32(b, uint32(n))
}

// TestCompressedBombs opens archives whose compressed .meta or .index
// expands to 100 MiB or a GiB from a file of kilobytes: zeros after the real
// records of a .meta.xz (refused at the first zero record, having
// decompressed one window), valid help records repeated in a .meta.xz
// (refused past 64 MiB, the cap for a .meta under 256 KiB), and zeros in
// a .index.zst (refused past 64 times its 240 KB). The error names the
// file and offset; the peak heap (live objects and garbage not yet
// collected) stays within 4 times the cap for the .index (read whole,
// then decoded into entries of 2.4 times their size), and for the
// .meta 64 MiB when it fails early (a window, the decompressor's
// dictionary, the metadata) or twice the cap when it decodes up to it
// (the help strings replaced record after record, garbage until the
// collector runs).
func TestCompressedBombs(t *testing.T) {
	src := filepath.Join(corpus, "archives", "indoms", "indoms")
	realMeta, err := os.ReadFile(src + ".meta")
	if err != nil {
		t.Fatal(err)
	}
	realIndex, err := os.ReadFile(src + ".index")
	if err != nil {
		t.Fatal(err)
	}
	const mib = 1 << 20
	cases := []struct {
		name, file string
		write      func(path string)
		want       string
		maxAlloc   int64
	}{
		{"meta-zeros", ".meta.xz", func(path string) {
			repeatStream(t, path, make([]byte, mib), 1024, xzWriter)
			prependStream(t, path, realMeta, xzWriter)
		}, "metadata record length 0 too small", 64 * mib},
		{"meta-records", ".meta.xz", func(path string) {
			rec := textRecord(uint32(semantics.NewPMID(245, 0, 1)), 1000)
			repeatStream(t, path, bytes.Repeat(rec, mib/len(rec)), 100, xzWriter)
			prependStream(t, path, realMeta, xzWriter)
		}, "refused as a decompression bomb", 2 * metaExpandedMin},
		{"index-zeros", ".index.zst", func(path string) {
			repeatStream(t, path, append(realIndex, make([]byte, mib)...), 1024, zstdWriter)
		}, "refused as a decompression bomb", 4 * indexExpansion * 240 << 10},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			base := filepath.Join(dir, "indoms")
			for _, ext := range []string{".0", ".meta", ".index"} {
				if strings.HasPrefix(c.file, ext) {
					continue
				}
				b, err := os.ReadFile(src + ext)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(base+ext, b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			c.write(base + c.file)
			fi, _ := os.Stat(base + c.file)
			runtime.GC()
			stop := peakHeap()
			began := time.Now()
			_, err := Open(base)
			took := time.Since(began)
			alloc := stop()
			t.Logf("%s: %d bytes compressed: %v in %v, peak live heap %d bytes", c.file, fi.Size(), err, took, alloc)
			var fe *FormatError
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), base+c.file) {
				t.Fatalf("err = %v, want a FormatError naming the file: %s", err, c.want)
			}
			if alloc > c.maxAlloc {
				t.Errorf("peak live heap %d bytes, bound %d", alloc, c.maxAlloc)
			}
			if took > 20*time.Second {
				t.Errorf("took %v", took)
			}
		})
	}
}

// peakHeap samples the live heap (bytes in objects) every 2 ms until the
// returned function is called, which returns the peak above the start.
func peakHeap() func() int64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() int64 {
		metrics.Read(sample)
		return int64(sample[0].Value.Uint64())
	}
	start := read()
	done := make(chan struct{})
	peak := make(chan int64)
	go func() {
		max := start
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			if v := read(); v > max {
				max = v
			}
			select {
			case <-done:
				peak <- max - start
				return
			case <-tick.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		return <-peak
	}
}

// TestRefreshPendingRecord grows a .meta file with half of a 1 MB record,
// then with the first 8 MiB of a record claiming 2^31-1 bytes: Refresh
// (once per scrape) does not read the tail again until the file holds the
// record, a record arriving in two writes is taken once whole, and a bad
// record's error is given again without reading until the file changes.
func TestRefreshPendingRecord(t *testing.T) {
	base := archivetest.CopyArchive(t, filepath.Join(corpus, "archives", "indoms", "indoms"), t.TempDir())
	a, err := Open(base)
	if err != nil {
		t.Fatal(err)
	}
	appendMeta := func(b []byte) {
		f, err := os.OpenFile(base+".meta", os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	refreshes := func(n int) int64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for i := 0; i < n; i++ {
			if err := a.Refresh(); err != nil {
				t.Fatal(err)
			}
		}
		runtime.ReadMemStats(&after)
		return int64(after.TotalAlloc - before.TotalAlloc)
	}
	// a help record in two writes
	pmid := semantics.NewPMID(245, 0, 77)
	rec := textRecord(uint32(pmid), 1000000)
	appendMeta(rec[:500000])
	refreshes(1)
	// bound: 16 MiB (reading the tail again would be 50 MB, 800 MiB for
	// the 8 MiB tail below), room for other tests' goroutines
	if alloc := refreshes(100); alloc > 16<<20 {
		t.Errorf("100 refreshes of a half-written record allocated %d bytes", alloc)
	}
	appendMeta(rec[500000:])
	refreshes(1)
	if h := a.Help(pmid); len(h) != 1000000 {
		t.Fatalf("help text of %d bytes after the record was completed", len(h))
	}
	// a record of 2^31-1 bytes, 8 MiB of it written
	huge := binary.BigEndian.AppendUint32(nil, 1<<31-1)
	huge = binary.BigEndian.AppendUint32(huge, typeText)
	appendMeta(append(huge, make([]byte, 8<<20)...))
	refreshes(1) // reads it once
	began := time.Now()
	if alloc := refreshes(100); alloc > 16<<20 {
		t.Errorf("100 refreshes with an 8 MiB pending tail allocated %d bytes (%v)", alloc, time.Since(began))
	}
	t.Logf("100 refreshes with an 8 MiB pending tail: %v", time.Since(began))

	// a bad record is reported, not read again while the file is unchanged
	base2 := archivetest.CopyArchive(t, filepath.Join(corpus, "archives", "indoms", "indoms"), t.TempDir())
	b, err := Open(base2)
	if err != nil {
		t.Fatal(err)
	}
	bad := binary.BigEndian.AppendUint32(nil, 5)
	f, _ := os.OpenFile(base2+".meta", os.O_APPEND|os.O_WRONLY, 0)
	f.Write(append(bad, make([]byte, 4<<20)...))
	f.Close()
	err1 := b.Refresh()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < 100; i++ {
		if err := b.Refresh(); err == nil || err.Error() != err1.Error() {
			t.Fatalf("refresh: %v, want %v", err, err1)
		}
	}
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
		t.Errorf("100 refreshes of a bad record allocated %d bytes", alloc)
	}
	var fe *FormatError
	if !errors.As(err1, &fe) || !strings.Contains(err1.Error(), "record length 5 too small") {
		t.Errorf("err = %v", err1)
	}
}

// FuzzCompressedMeta reads .meta contents compressed (gzip), a window at a
// time, and whole as a plain file: the same records, or the same error.
func FuzzCompressedMeta(f *testing.F) {
	for _, b := range corpusFiles(f, ".meta") {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		plain := filepath.Join(dir, "x.meta")
		if err := os.WriteFile(plain, b, 0o644); err != nil {
			t.Fatal(err)
		}
		archivetest.CompressFile(t, plain, plain+".gz", func(w io.Writer) (io.WriteCloser, error) { return gzip.NewWriter(w), nil })
		l1, m1, err1 := readMeta(plain, false)
		l2, m2, err2 := readMeta(plain+".gz", false)
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("plain: %v, compressed: %v", err1, err2)
		}
		if err1 != nil {
			if e1, e2 := err1.Error(), strings.ReplaceAll(err2.Error(), ".meta.gz", ".meta"); e1 != e2 {
				t.Fatalf("plain: %s\ncompressed: %s", e1, e2)
			}
			return
		}
		if l1 != l2 || m1.off != m2.off || len(m1.descs) != len(m2.descs) || len(m1.indoms) != len(m2.indoms) || len(m1.texts) != len(m2.texts) || len(m1.labels) != len(m2.labels) {
			t.Fatalf("plain: %+v, %d bytes; compressed: %+v, %d bytes", l1, m1.off, l2, m2.off)
		}
	})
}

package archive

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// v3InDomRecord encodes a v3 indom record (typeInDom or typeInDomDelta);
// an instance with an empty name is a removal (delta).
func v3InDomRecord(typ uint32, t time.Time, indom semantics.InDom, insts []source.Instance) []byte {
	var strs []byte
	idx := make([]int32, len(insts))
	for i, in := range insts {
		if in.Name == "" {
			idx[i] = -1
			continue
		}
		idx[i] = int32(len(strs))
		strs = append(append(strs, in.Name...), 0)
	}
	n := 8 + 12 + 4 + 4 + 8*len(insts) + len(strs) + 4
	b := make([]byte, 0, n)
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	b = binary.BigEndian.AppendUint32(b, typ)
	sec := uint64(t.Unix())
	b = binary.BigEndian.AppendUint32(b, uint32(sec))
	b = binary.BigEndian.AppendUint32(b, uint32(sec>>32))
	b = binary.BigEndian.AppendUint32(b, uint32(t.Nanosecond()))
	b = binary.BigEndian.AppendUint32(b, uint32(indom))
	b = binary.BigEndian.AppendUint32(b, uint32(len(insts)))
	for _, in := range insts {
		b = binary.BigEndian.AppendUint32(b, uint32(in.ID))
	}
	for _, x := range idx {
		b = binary.BigEndian.AppendUint32(b, uint32(x))
	}
	b = append(b, strs...)
	return binary.BigEndian.AppendUint32(b, uint32(n))
}

// deltaIndom is the corpus v3 archive's indom that indoms.gauge and
// indoms.state have.
var deltaIndom = semantics.NewInDom(245, 1)

// writeDeltaArchive copies the corpus's indoms_v3 archive into dir and
// appends to its .meta a full record of deltaIndom with b instances, then
// d deltas a millisecond apart, each removing the oldest instance and
// adding a new one (every 7th re-adds a removed id under a new name). It
// returns the base name and the instances expected after each record.
func writeDeltaArchive(t testing.TB, dir string, b, d int, keepExpected bool) (string, [][]source.Instance) {
	src := filepath.Join(corpus, "archives", "indoms", "indoms_v3")
	base := filepath.Join(dir, "indoms_v3")
	for _, ext := range []string{".0", ".index", ".meta"} {
		raw, err := os.ReadFile(src + ext)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(base+ext, raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a, err := Open(base)
	if err != nil {
		t.Fatal(err)
	}
	at := deltaStart(a)
	f, err := os.OpenFile(base+".meta", os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cur := map[int32]string{}
	var full []source.Instance
	var queue []int32 // present ids, oldest first
	for i := 0; i < b; i++ {
		in := source.Instance{ID: int32(100 + i), Name: fmt.Sprintf("i%06d", 100+i)}
		full = append(full, in)
		cur[in.ID] = in.Name
		queue = append(queue, in.ID)
	}
	var expected [][]source.Instance
	snapshot := func() {
		if !keepExpected {
			return
		}
		var s []source.Instance
		for id := int32(0); id < int32(100+b+d); id++ {
			if n, ok := cur[id]; ok {
				s = append(s, source.Instance{ID: id, Name: n})
			}
		}
		expected = append(expected, s)
	}
	snapshot()
	out := v3InDomRecord(typeInDom, at, deltaIndom, full)
	var removed []int32
	for k := 0; k < d; k++ {
		// libpcp 6.0.3 corrupts its heap on a delta removing an absent
		// instance: only present ones are removed
		gone := queue[0]
		queue = queue[1:]
		removed = append(removed, gone)
		added := source.Instance{ID: int32(100 + b + k), Name: fmt.Sprintf("n%06d", 100+b+k)}
		if k%7 == 6 && len(removed) > 3 {
			id := removed[len(removed)-3]
			added = source.Instance{ID: id, Name: fmt.Sprintf("again%06d", k)}
		}
		delete(cur, gone)
		if _, ok := cur[added.ID]; !ok {
			cur[added.ID] = added.Name
			queue = append(queue, added.ID)
		}
		out = append(out, v3InDomRecord(typeInDomDelta, at.Add(time.Duration(k+1)*time.Millisecond), deltaIndom, []source.Instance{{ID: gone}, added})...)
		snapshot()
	}
	if _, err := f.Write(out); err != nil {
		t.Fatal(err)
	}
	return base, expected
}

// deltaStart is the time of writeDeltaArchive's full record.
func deltaStart(a *Archive) time.Time { return a.Label().Start.Add(2 * time.Second) }

// TestInDomDeltasMatchPmdumplog checks the instances in force after every
// delta of a crafted v3 archive against the test's own bookkeeping and
// against `pmdumplog -i` (libpcp).
func TestInDomDeltasMatchPmdumplog(t *testing.T) {
	base, expected := writeDeltaArchive(t, t.TempDir(), 40, 150, true)
	a, err := Open(base)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range expected {
		at := deltaStart(a).Add(time.Duration(i) * time.Millisecond)
		if got := fmt.Sprint(a.InstancesAt(deltaIndom, at)); got != fmt.Sprint(want) {
			t.Fatalf("after record %d:\n got %s\nwant %v", i, got, want)
		}
	}
	bin := e2e.Require(t, "pmdumplog")[0]
	out, err := exec.Command(bin, "-i", base).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("pmdumplog: %v\n%s", err, stderr)
	}
	checked := checkInDomsAgainstPmdumplog(t, a, out)
	if checked < len(expected) {
		t.Errorf("%d indom records checked against pmdumplog, want at least %d", checked, len(expected))
	}
}

// TestInDomDeltasBounded opens a 300 KB v3 archive whose .meta holds an
// indom of 4000 instances changed by 4000 deltas (full copies: 16 million
// instances, ~1 GB), lists its instances, and replays a metric of the
// domain (libpcp's time calipers): the bytes allocated and those retained
// stay within a stated multiple of the .meta file.
func TestInDomDeltasBounded(t *testing.T) {
	const b, d = 4000, 4000
	base, _ := writeDeltaArchive(t, t.TempDir(), b, d, false)
	fi, err := os.Stat(base + ".meta")
	if err != nil {
		t.Fatal(err)
	}
	size := fi.Size()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	began := time.Now()
	a, err := Open(base)
	if err != nil {
		t.Fatal(err)
	}
	ins := a.Instances(deltaIndom)
	end := a.InstancesAt(deltaIndom, deltaStart(a).Add(d*time.Millisecond))
	runtime.GC()
	runtime.ReadMemStats(&after)
	retained := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	alloc := int64(after.TotalAlloc - before.TotalAlloc)
	t.Logf(".meta %d bytes: %d allocated, %d retained, %v; %d instances ever, %d at the end", size, alloc, retained, time.Since(began), len(ins), len(end))
	// factor: 40 bytes of source.Instance per 8-byte instance entry,
	// deltas and copies (at most as many as the deltas) included
	if retained > 16*size {
		t.Errorf("retained %d bytes for a %d-byte .meta (bound 16x)", retained, size)
	}
	if alloc > 64*size {
		t.Errorf("allocated %d bytes for a %d-byte .meta (bound 64x)", alloc, size)
	}
	if len(end) != b {
		t.Errorf("%d instances at the end, want %d", len(end), b)
	}

	// a replay of the domain's metric computes its calipers
	runtime.GC()
	runtime.ReadMemStats(&before)
	began = time.Now()
	rp, err := NewReplay([]*Archive{a}, ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rp.Close()
	p, ok := a.Lookup("indoms.gauge")
	if !ok {
		t.Fatal("no indoms.gauge")
	}
	var res source.Result
	for i := 0; i < 10; i++ {
		if err := rp.Fetch(a.Label().Start.Add(time.Duration(i)*5*time.Second), []semantics.PMID{p}, &res); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	alloc = int64(after.TotalAlloc - before.TotalAlloc)
	t.Logf("replay: %d allocated, %v", alloc, time.Since(began))
	if alloc > 64*size {
		t.Errorf("replay allocated %d bytes for a %d-byte .meta (bound 64x)", alloc, size)
	}
}

// repeatStream writes n copies of one compressed stream of chunk: the
// readers take concatenated xz streams and zstd frames as one file, so a
// file of n small streams expands to n times chunk.
func repeatStream(t testing.TB, path string, chunk []byte, n int, c compressor) {
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
func prependStream(t testing.TB, path string, b []byte, c compressor) {
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
	base := copyArchive(t, filepath.Join(corpus, "archives", "indoms", "indoms"), t.TempDir())
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
	base2 := copyArchive(t, filepath.Join(corpus, "archives", "indoms", "indoms"), t.TempDir())
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
		compressFile(t, plain, plain+".gz", func(w io.Writer) (io.WriteCloser, error) { return gzip.NewWriter(w), nil })
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

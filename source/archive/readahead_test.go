package archive

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readTrace reads every record of the archive at base and describes them
// (volume, offset, time, sets and values) and how the reading ended.
func readTrace(t *testing.T, base string) string {
	t.Helper()
	a, err := Open(base)
	if err != nil {
		return "open: " + err.Error()
	}
	r := a.Records()
	defer r.Close()
	var b strings.Builder
	for r.Next() {
		rec := r.Record()
		n := 0
		for _, s := range rec.Sets {
			n += len(s.Values)
			for _, v := range s.Values {
				fmt.Fprintf(&b, "%d=%s ", v.Inst, valueKey(v.Value))
			}
		}
		fmt.Fprintf(&b, "\n%d@%d %d %v %d sets %d values\n", rec.Vol, rec.Off, rec.Time.UnixNano(), rec.Mark, len(rec.Sets), n)
	}
	fmt.Fprintf(&b, "end: %v", r.Err())
	return b.String()
}

// TestReadAheadAsDirect: reading ahead in a goroutine, in chunks of whole
// records, reads what the reader reads by itself, and ends the same way:
// every corpus volume whole, cut inside and at the end of each of its
// records (the end of the data: a partial last record), with each record's
// length out of range (an error at that offset), and gzipped then cut (a
// read error after the last bytes decompressed); chunks of 256 bytes, so
// that most records need a larger one.
func TestReadAheadAsDirect(t *testing.T) {
	defer func(w, a int) { minWindow, aheadAfter = w, a }(minWindow, aheadAfter)
	minWindow = 256
	started := aheadStarted.Load()
	compare := func(name, base string) {
		aheadAfter = 1 << 30
		want := readTrace(t, base)
		aheadAfter = 1
		got := readTrace(t, base)
		if got != want {
			t.Errorf("%s: read ahead:\n%s\nwant:\n%s", name, tail(got), tail(want))
		}
	}
	n := 0
	for _, arch := range []string{"archives/live/live", "archives/live/live_v3", "archives/seedtables/seedtables", "archives/multivol/multivol", "archives/marks/marks", "archives/compressed/indoms_xz"} {
		dir := t.TempDir()
		base := copyArchive(t, filepath.Join(corpus, arch), dir)
		compare(arch, base)
		vol := base + ".0"
		if _, err := os.Stat(vol); err != nil {
			continue // compressed: whole only
		}
		b, err := os.ReadFile(vol)
		if err != nil {
			t.Fatal(err)
		}
		var recs []int
		for pos := int(be32(b)); pos+16 <= len(b); pos += int(be32(b[pos:])) {
			recs = append(recs, pos)
		}
		step := max(1, len(recs)/15)
		for i := 0; i < len(recs); i += step {
			at := recs[i]
			for _, cut := range []int{at + 3, at + 20, at + int(be32(b[at:])) - 1} {
				if err := os.WriteFile(vol, b[:min(cut, len(b))], 0o644); err != nil {
					t.Fatal(err)
				}
				compare(fmt.Sprintf("%s cut at %d", arch, cut), base)
				n++
			}
			for _, l := range []uint32{3, 0x7fffffff, 0xffffff00} {
				bad := append([]byte(nil), b...)
				put32(bad, at, l)
				if err := os.WriteFile(vol, bad, 0o644); err != nil {
					t.Fatal(err)
				}
				compare(fmt.Sprintf("%s record %d length %#x", arch, i, l), base)
				n++
			}
		}
		// the volume gzipped and cut short: the decompressor returns its
		// last bytes with the error, whose whole records come first
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		zw.Write(b)
		zw.Close()
		if err := os.Remove(vol); err != nil {
			t.Fatal(err)
		}
		zb := z.Bytes()
		for cut := len(zb) / 3; cut < len(zb); cut += max(1, len(zb)/20) {
			if err := os.WriteFile(vol+".gz", zb[:cut], 0o644); err != nil {
				t.Fatal(err)
			}
			compare(fmt.Sprintf("%s gzipped, cut at %d of %d", arch, cut, len(zb)), base)
			n++
		}
		os.Remove(vol + ".gz")
		if err := os.WriteFile(vol, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if n < 100 || aheadStarted.Load()-started < int64(n) {
		t.Errorf("%d variants, %d read-aheads started", n, aheadStarted.Load()-started)
	}
}

// TestReadAheadFollowsGrowth: a reader reading ahead sees the records
// appended after it reached the end, the record cut by the end included.
func TestReadAheadFollowsGrowth(t *testing.T) {
	defer func(w, a int) { minWindow, aheadAfter = w, a }(minWindow, aheadAfter)
	minWindow, aheadAfter = 256, 1
	src := filepath.Join(corpus, "archives/live/live")
	dir := t.TempDir()
	base := copyArchive(t, src, dir)
	b, _ := os.ReadFile(base + ".0")
	full, err := drain(base)
	if err != nil {
		t.Fatal(err)
	}
	started := aheadStarted.Load()
	// cut inside a record, then grow to inside a later one, then whole
	cuts := []int{len(b) / 3, 2*len(b)/3 + 5, len(b)}
	if err := os.WriteFile(base+".0", b[:cuts[0]], 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := Open(base)
	if err != nil {
		t.Fatal(err)
	}
	r := a.Records()
	defer r.Close()
	n := 0
	var last int64
	for i, cut := range cuts {
		if i > 0 {
			f, _ := os.OpenFile(base+".0", os.O_APPEND|os.O_WRONLY, 0)
			f.Write(b[cuts[i-1]:cut])
			f.Close()
		}
		for r.Next() {
			if off := r.Record().Off; off <= last {
				t.Fatalf("record at %d after %d", off, last)
			}
			last = r.Record().Off
			n++
		}
		if r.Err() != nil {
			t.Fatal(r.Err())
		}
	}
	if n != full {
		t.Errorf("%d records read while the volume grew, %d in it", n, full)
	}
	if aheadStarted.Load() == started {
		t.Error("no read-ahead started")
	}
}

func tail(s string) string {
	if len(s) > 600 {
		return "..." + s[len(s)-600:]
	}
	return s
}

package pcplog

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ulikunitz/xz"
)

var updateHostile = flag.Bool("update", false, "rewrite testdata/hostile/archive and its golden errors from the corpus")

// hostileDir holds crafted archives (made from the corpus's seedtables
// archives by hostileCases, regenerated with -update) and errors.golden, the
// outcome of reading each.
var hostileDir = filepath.Join("..", "..", "..", "testdata", "hostile", "archive")

// goldenDir is hostileDir as errors.golden names it.
const goldenDir = "../../testdata/hostile/archive"

type archiveFiles map[string][]byte // extension (".0", ".meta", ".index", ".0.xz") -> content

func put32(b []byte, off int, v uint32) { binary.BigEndian.PutUint32(b[off:], v) }

// metaRecord returns the offset and length of the first .meta record of
// type typ (after the label).
func metaRecord(t *testing.T, b []byte, typ uint32) (int, int) {
	pos := int(be32(b))
	for pos+8 <= len(b) {
		n := int(be32(b[pos:]))
		if be32(b[pos+4:]) == typ {
			return pos, n
		}
		pos += n
	}
	t.Fatalf("no .meta record of type %d", typ)
	return 0, 0
}

// firstPointer returns the offset of the pointer word of the first value
// block (valfmt != 0) of a v2 volume, and of the record holding it.
func firstPointer(t *testing.T, b []byte) (word, recOff int) {
	pos := int(be32(b))
	for pos+16 <= len(b) {
		n := int(be32(b[pos:]))
		np := int(int32(be32(b[pos+12:])))
		p := pos + 16
		for i := 0; i < np; i++ {
			nv := int(int32(be32(b[p+4:])))
			if nv <= 0 {
				p += 8
				continue
			}
			if be32(b[p+8:]) != 0 {
				return p + 12 + 4, pos
			}
			p += 12 + 8*nv
		}
		pos += n
	}
	t.Fatal("no pointer value in the volume")
	return 0, 0
}

// firstDataRecord returns the offset of the first data record of a volume
// that holds at least one value set.
func firstDataRecord(t *testing.T, b []byte) int {
	pos := int(be32(b))
	for pos+16 <= len(b) {
		if int32(be32(b[pos+12:])) > 0 {
			return pos
		}
		pos += int(be32(b[pos:]))
	}
	t.Fatal("no data record")
	return 0
}

func xzBytes(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	w, err := xz.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// hostileCases are the crafted archives: each starts from seedtables (v2)
// (types/types: v2 with every value type, indoms, labels, help) or
// seedtables_v3 and breaks one thing.
var hostileCases = []struct {
	name, from string
	mutate     func(t *testing.T, f archiveFiles)
}{
	{"label-bad-magic", "types/types", func(t *testing.T, f archiveFiles) { put32(f[".meta"], 4, 0x12345678) }},
	{"label-length-zero", "types/types", func(t *testing.T, f archiveFiles) { put32(f[".meta"], 0, 0) }},
	{"label-length-disagrees", "types/types", func(t *testing.T, f archiveFiles) { put32(f[".0"], 0, 200) }},
	{"label-hostname-no-nul", "types/types", func(t *testing.T, f archiveFiles) {
		copy(f[".meta"][24:], bytes.Repeat([]byte("h"), 64+40))
	}},
	{"v3-label-length-huge", "seedtables/seedtables_v3", func(t *testing.T, f archiveFiles) { put32(f[".meta"], 0, 0x7fffffff) }},
	{"meta-record-length-zero", "types/types", func(t *testing.T, f archiveFiles) {
		put32(f[".meta"], int(be32(f[".meta"])), 0)
	}},
	{"meta-record-length-negative", "types/types", func(t *testing.T, f archiveFiles) {
		put32(f[".meta"], int(be32(f[".meta"])), 0xfffffff0)
	}},
	{"meta-record-length-huge", "types/types", func(t *testing.T, f archiveFiles) {
		put32(f[".meta"], int(be32(f[".meta"])), 0x7fffffff)
	}},
	{"meta-trailer-disagrees", "types/types", func(t *testing.T, f archiveFiles) {
		b := f[".meta"]
		pos := int(be32(b))
		put32(b, pos+int(be32(b[pos:]))-4, 999)
	}},
	{"meta-unknown-type", "types/types", func(t *testing.T, f archiveFiles) {
		put32(f[".meta"], int(be32(f[".meta"]))+4, 99)
	}},
	{"meta-desc-numnames-2^31", "types/types", func(t *testing.T, f archiveFiles) {
		pos, _ := metaRecord(t, f[".meta"], typeDesc)
		put32(f[".meta"], pos+28, 0x80000000)
	}},
	{"meta-desc-numnames-2^31-1", "types/types", func(t *testing.T, f archiveFiles) {
		pos, _ := metaRecord(t, f[".meta"], typeDesc)
		put32(f[".meta"], pos+28, 0x7fffffff)
	}},
	{"meta-desc-name-length-past-end", "types/types", func(t *testing.T, f archiveFiles) {
		pos, _ := metaRecord(t, f[".meta"], typeDesc)
		put32(f[".meta"], pos+32, 0x7fffffff)
	}},
	{"meta-desc-name-length-negative", "types/types", func(t *testing.T, f archiveFiles) {
		pos, _ := metaRecord(t, f[".meta"], typeDesc)
		put32(f[".meta"], pos+32, 0xffffffff)
	}},
	{"meta-indom-numinst-2^31", "types/types", func(t *testing.T, f archiveFiles) {
		pos, _ := metaRecord(t, f[".meta"], typeInDomV2)
		put32(f[".meta"], pos+20, 0x80000000)
	}},
	{"meta-indom-numinst-2^31-1", "types/types", func(t *testing.T, f archiveFiles) {
		pos, _ := metaRecord(t, f[".meta"], typeInDomV2)
		put32(f[".meta"], pos+20, 0x7fffffff)
	}},
	{"meta-indom-name-offset-past-end", "types/types", func(t *testing.T, f archiveFiles) {
		b := f[".meta"]
		pos, _ := metaRecord(t, b, typeInDomV2)
		n := int(be32(b[pos+20:]))
		put32(b, pos+24+4*n, 0x7fffffff)
	}},
	{"meta-indom-name-no-nul", "types/types", func(t *testing.T, f archiveFiles) {
		b := f[".meta"]
		pos, n := metaRecord(t, b, typeInDomV2)
		ni := int(be32(b[pos+20:]))
		for i := pos + 24 + 8*ni; i < pos+n-4; i++ {
			if b[i] == 0 {
				b[i] = 'x'
			}
		}
	}},
	{"meta-indom-records-overlap", "types/types", func(t *testing.T, f archiveFiles) {
		// the first indom record's length reaches into the next record
		b := f[".meta"]
		pos, n := metaRecord(t, b, typeInDomV2)
		put32(b, pos, uint32(n+8))
	}},
	{"meta-bomb-xz", "types/types", func(t *testing.T, f archiveFiles) {
		// 16 MiB of zeros after the real metadata: a zero record length
		bomb := append(f[".meta"], make([]byte, 16<<20)...)
		delete(f, ".meta")
		f[".meta.xz"] = xzBytes(t, bomb)
	}},
	{"meta-bomb-xz-cut-short", "types/types", func(t *testing.T, f archiveFiles) {
		bomb := append(f[".meta"], make([]byte, 16<<20)...)
		z := xzBytes(t, bomb)
		delete(f, ".meta")
		f[".meta.xz"] = z[:len(z)/2]
	}},
	{"index-entry-past-end", "types/types", func(t *testing.T, f archiveFiles) {
		b := f[".index"]
		for e := int(be32(b)); e+20 <= len(b); e += 20 {
			put32(b, e+12, 0x7fffff00) // meta offset
			put32(b, e+16, 0x7fffff00) // data offset
		}
	}},
	{"index-entry-negative-offset", "types/types", func(t *testing.T, f archiveFiles) {
		b := f[".index"]
		for e := int(be32(b)); e+20 <= len(b); e += 20 {
			put32(b, e+16, 0xfffffff0)
		}
	}},
	{"index-entry-mid-record", "types/types", func(t *testing.T, f archiveFiles) {
		b := f[".index"]
		for e := int(be32(b)); e+20 <= len(b); e += 20 {
			put32(b, e+16, be32(b[e+16:])+6)
		}
	}},
	{"index-entry-cut-short", "types/types", func(t *testing.T, f archiveFiles) {
		f[".index"] = f[".index"][:int(be32(f[".index"]))+7]
	}},
	{"volume-record-length-zero", "types/types", func(t *testing.T, f archiveFiles) {
		put32(f[".0"], firstDataRecord(t, f[".0"]), 0)
	}},
	{"volume-record-length-negative", "types/types", func(t *testing.T, f archiveFiles) {
		put32(f[".0"], firstDataRecord(t, f[".0"]), 0x80000000)
	}},
	{"volume-record-length-huge", "types/types", func(t *testing.T, f archiveFiles) {
		put32(f[".0"], firstDataRecord(t, f[".0"]), 0x7ffffff0)
	}},
	{"volume-trailer-disagrees", "types/types", func(t *testing.T, f archiveFiles) {
		b := f[".0"]
		pos := firstDataRecord(t, b)
		put32(b, pos+int(be32(b[pos:]))-4, 12)
	}},
	{"volume-numpmid-2^31-1", "types/types", func(t *testing.T, f archiveFiles) {
		put32(f[".0"], firstDataRecord(t, f[".0"])+12, 0x7fffffff)
	}},
	{"volume-numpmid-negative", "types/types", func(t *testing.T, f archiveFiles) {
		put32(f[".0"], firstDataRecord(t, f[".0"])+12, 0x80000000)
	}},
	{"volume-numval-2^31-1", "types/types", func(t *testing.T, f archiveFiles) {
		put32(f[".0"], firstDataRecord(t, f[".0"])+20, 0x7fffffff)
	}},
	{"volume-valfmt-unknown", "types/types", func(t *testing.T, f archiveFiles) {
		w, _ := firstPointer(t, f[".0"])
		put32(f[".0"], w-8, 7)
	}},
	{"volume-pointer-past-end", "types/types", func(t *testing.T, f archiveFiles) {
		w, _ := firstPointer(t, f[".0"])
		put32(f[".0"], w, 0x7fffffff)
	}},
	{"volume-pointer-self", "types/types", func(t *testing.T, f archiveFiles) {
		// the block header is read from the pointer word itself
		w, rec := firstPointer(t, f[".0"])
		put32(f[".0"], w, uint32((w-rec+8)/4))
	}},
	{"volume-pointer-into-header", "types/types", func(t *testing.T, f archiveFiles) {
		w, _ := firstPointer(t, f[".0"])
		put32(f[".0"], w, 2)
	}},
	{"volume-block-length-huge", "types/types", func(t *testing.T, f archiveFiles) {
		b := f[".0"]
		w, rec := firstPointer(t, b)
		bo := rec + int(be32(b[w:]))*4 - 8
		put32(b, bo, be32(b[bo:])&0xff000000|0xffffff)
	}},
	{"volume-block-length-zero", "types/types", func(t *testing.T, f archiveFiles) {
		b := f[".0"]
		w, rec := firstPointer(t, b)
		bo := rec + int(be32(b[w:]))*4 - 8
		put32(b, bo, be32(b[bo:])&0xff000000)
	}},
	{"volume-xz-cut-short", "types/types", func(t *testing.T, f archiveFiles) {
		z := xzBytes(t, f[".0"])
		delete(f, ".0")
		f[".0.xz"] = z[:len(z)*2/3]
	}},
}

// readEverything opens the archive and reads all it offers: metadata,
// instances, every record, and two records from each index entry (a
// RecordsFrom just after its time). It returns how many records each way.
func readEverything(base string) (string, error) {
	a, err := Open(base)
	if err != nil {
		return "", err
	}
	defer a.Close()
	for _, m := range a.Metrics() {
		a.Instances(m.Desc.InDom)
		a.MetricLabels(m.Desc)
		a.Help(m.Desc.PMID)
	}
	r := a.Records()
	n := 0
	for r.Next() {
		n++
	}
	err = r.Err()
	r.Close()
	if err != nil {
		return "", err
	}
	seen := map[time.Time]bool{}
	fromIndex := 0
	for _, e := range a.Index() {
		if seen[e.Time] {
			continue
		}
		seen[e.Time] = true
		r := a.RecordsFrom(e.Time.Add(time.Nanosecond)) // seeks to this entry
		for i := 0; i < 2 && r.Next(); i++ {
			fromIndex++
		}
		err := r.Err()
		r.Close()
		if err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("ok: %d records, %d read from %d index times", n, fromIndex, len(seen)), nil
}

func writeHostile(t *testing.T) {
	if err := os.RemoveAll(hostileDir); err != nil {
		t.Fatal(err)
	}
	for _, c := range hostileCases {
		src := filepath.Join(corpus, "archives", c.from)
		f := archiveFiles{}
		for _, ext := range []string{".0", ".meta", ".index"} {
			b, err := os.ReadFile(src + ext)
			if err != nil {
				t.Fatal(err)
			}
			f[ext] = b
		}
		c.mutate(t, f)
		dir := filepath.Join(hostileDir, c.name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for ext, b := range f {
			if err := os.WriteFile(filepath.Join(dir, filepath.Base(c.from)+ext), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestHostileArchives reads every crafted archive of testdata/hostile/archive:
// never a panic or a hang, every error a one-line message naming the file
// (format errors with the byte offset), the outcome as in errors.golden, and
// the bytes allocated bounded by 4 times the (decompressed) data present
// plus 16 MiB (the readers' windows: 1 MiB each, one per RecordsFrom).
func TestHostileArchives(t *testing.T) {
	if *updateHostile {
		writeHostile(t)
	}
	var got strings.Builder
	for _, c := range hostileCases {
		dir := filepath.Join(hostileDir, c.name)
		base := filepath.Join(dir, filepath.Base(c.from))
		var present int64
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatalf("%v (run with -update)", err)
		}
		for _, e := range ents {
			info, _ := e.Info()
			present += info.Size()
			if strings.HasSuffix(e.Name(), ".xz") {
				present += 16 << 20 // the bombs' zeros
			}
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		type result struct {
			summary string
			err     error
		}
		done := make(chan result, 1)
		go func() { s, err := readEverything(base); done <- result{s, err} }()
		var res result
		select {
		case res = <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: reading hangs", c.name)
		}
		runtime.ReadMemStats(&after)
		if alloc := int64(after.TotalAlloc - before.TotalAlloc); alloc > 4*present+16<<20 {
			t.Errorf("%s: allocated %d bytes for %d bytes of data", c.name, alloc, present)
		}
		outcome, err2 := res.summary, res.err
		if err2 != nil {
			outcome = err2.Error()
			if !strings.Contains(outcome, base) {
				t.Errorf("%s: error does not name the file: %s", c.name, outcome)
			}
			if strings.Contains(outcome, "\n") {
				t.Errorf("%s: error spans lines: %q", c.name, outcome)
			}
		}
		// errors.golden names the files as seen from source/archive, where
		// the test was written
		outcome = strings.ReplaceAll(outcome, hostileDir, goldenDir)
		fmt.Fprintf(&got, "%s: %s\n", c.name, outcome)
	}
	golden := filepath.Join(hostileDir, "errors.golden")
	if *updateHostile {
		if err := os.WriteFile(golden, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != string(want) {
		t.Errorf("outcomes differ from %s (run with -update after checking):\ngot:\n%swant:\n%s", golden, got.String(), want)
	}
}

package pcplog

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pcp-exporter/pcp-exporter/internal/longtest"
	"github.com/pcp-exporter/pcp-exporter/source/archive/internal/archivetest"
)

// drain opens and reads everything; it must not panic. It returns the error
// met, if any.
func drain(path string) (n int, err error) {
	a, err := Open(path)
	if err != nil {
		return 0, err
	}
	defer a.Close()
	for _, m := range a.Metrics() {
		a.Instances(m.Desc.InDom)
	}
	r := a.Records()
	defer r.Close()
	for r.Next() {
		n++
	}
	return n, r.Err()
}

var corruptAll = os.Getenv("PCPX_CORRUPT_ALL") != ""

// TestCorruptEveryByte flips every byte (and truncates at every offset) of
// each file of small v2 and v3 archives: never a panic, and every error names
// the file; format errors carry an offset inside the file. PCPX_CORRUPT_ALL=1
// adds the types archive (every value type, labels, help; about a minute).
// Without PCPX_LONG_TESTS it visits every ninth offset, a different ninth
// in each file.
func TestCorruptEveryByte(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("slow")
	}
	names := []string{"seedtables/seedtables", "seedtables/seedtables_v3", "marks/marks_pmi_v3"}
	if corruptAll {
		names = append(names, "types/types", "types/types_v3")
	}
	step := 1
	if !longtest.Enabled() {
		step = 9
	}
	nfile := 0
	for _, name := range names {
		src := filepath.Join(corpus, "archives", name)
		for _, ext := range []string{".0", ".meta", ".index"} {
			first := nfile % step
			nfile++
			orig, err := os.ReadFile(src + ext)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			base := archivetest.CopyArchive(t, src, dir)
			file := base + ext
			check := func(what string, size int) {
				_, err := drain(base)
				if err == nil {
					return
				}
				if !strings.Contains(err.Error(), filepath.Base(base)) {
					t.Fatalf("%s%s %s: error does not name the file: %v", name, ext, what, err)
				}
				var fe *FormatError
				if errors.As(err, &fe) && (fe.Off < 0 || fe.Off > int64(size)) {
					t.Fatalf("%s%s %s: offset %d outside the %d-byte file: %v", name, ext, what, fe.Off, size, err)
				}
			}
			b := append([]byte(nil), orig...)
			for i := first; i < len(orig); i += step {
				for _, x := range []byte{0xff, 0x80} {
					b[i] = orig[i] ^ x
					if err := os.WriteFile(file, b, 0o644); err != nil {
						t.Fatal(err)
					}
					check("flip", len(b))
				}
				b[i] = orig[i]
			}
			for i := first; i < len(orig); i += step {
				if err := os.WriteFile(file, orig[:i], 0o644); err != nil {
					t.Fatal(err)
				}
				check("truncate", i)
			}
		}
	}
}

// TestTruncatedLastRecord: a volume cut inside its last record (pmlogger
// still writing) ends iteration cleanly with the complete records.
func TestTruncatedLastRecord(t *testing.T) {
	dir := t.TempDir()
	base := archivetest.CopyArchive(t, filepath.Join(corpus, "archives/seedtables/seedtables_v3"), dir)
	full, err := drain(base)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(base + ".0")
	if err := os.WriteFile(base+".0", b[:len(b)-7], 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := drain(base)
	if err != nil || n != full-1 {
		t.Errorf("truncated: %d records, err %v; want %d, nil", n, err, full-1)
	}
}

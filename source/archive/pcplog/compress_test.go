package pcplog

import (
	"compress/gzip"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
	"github.com/ulikunitz/xz/lzma"

	"github.com/pcp-exporter/pcp-exporter/source/archive/internal/archivetest"
)

// TestCompressedFiles compresses every file of corpus archives (volumes,
// .meta and .index) with each supported format and checks that the records
// and the metadata read are those of the plain archive.
func TestCompressedFiles(t *testing.T) {
	t.Parallel()
	formats := map[string]archivetest.Compressor{
		".gz":  func(w io.Writer) (io.WriteCloser, error) { return gzip.NewWriter(w), nil },
		".z":   func(w io.Writer) (io.WriteCloser, error) { return gzip.NewWriter(w), nil },
		".zst": func(w io.Writer) (io.WriteCloser, error) { return zstd.NewWriter(w) },
		".xz":  func(w io.Writer) (io.WriteCloser, error) { return xz.NewWriter(w) },
		".lzma": func(w io.Writer) (io.WriteCloser, error) {
			return lzma.NewWriter(w)
		},
	}
	if _, err := exec.LookPath("bzip2"); err == nil {
		formats[".bz2"] = nil // compressed with the bzip2 command below
	}
	for _, name := range []string{"multivol/multivol", "indoms/indoms_v3"} {
		plain, err := Open(filepath.Join(corpus, "archives", name))
		if err != nil {
			t.Fatal(err)
		}
		want := recordRows(t, plain)
		for suf, c := range formats {
			t.Run(name+suf, func(t *testing.T) {
				dir := t.TempDir()
				base := archivetest.CopyArchive(t, filepath.Join(corpus, "archives", name), dir)
				files, _ := filepath.Glob(base + ".*")
				for _, f := range files {
					if c == nil {
						if out, err := exec.Command("bzip2", f).CombinedOutput(); err != nil {
							t.Fatalf("bzip2: %v %s", err, out)
						}
						continue
					}
					archivetest.CompressFile(t, f, f+suf, c)
					os.Remove(f)
				}
				for _, open := range []string{base, base + ".meta" + suf, base + ".0" + suf} {
					a, err := Open(open)
					if err != nil {
						t.Fatal(err)
					}
					if got := recordRows(t, a); !reflect.DeepEqual(got, want) {
						t.Errorf("open %s: records differ from the plain archive", filepath.Base(open))
					}
					if !reflect.DeepEqual(a.Metrics(), plain.Metrics()) {
						t.Errorf("open %s: metrics differ", filepath.Base(open))
					}
					if !reflect.DeepEqual(a.Index(), plain.Index()) {
						t.Errorf("open %s: index differs", filepath.Base(open))
					}
				}
			})
		}
	}
}

func TestUnsupportedCompression(t *testing.T) {
	dir := t.TempDir()
	base := archivetest.CopyArchive(t, filepath.Join(corpus, "archives/seedtables/seedtables"), dir)
	if err := os.Rename(base+".0", base+".0.Z"); err != nil {
		t.Fatal(err)
	}
	_, err := Open(base)
	if !errors.Is(err, ErrUnsupportedCompression) || !strings.Contains(err.Error(), "seedtables.0.Z") {
		t.Errorf("got %v, want an unsupported compression error naming the file", err)
	}
}

func TestBaseName(t *testing.T) {
	for in, want := range map[string]string{
		"a/b":              "a/b",
		"a/b.meta":         "a/b",
		"a/b.meta.xz":      "a/b",
		"a/b.index":        "a/b",
		"a/b.0":            "a/b",
		"a/b.12.zst":       "a/b",
		"a/20240101.00.10": "a/20240101.00",
		"a/b.xz":           "a/b",
	} {
		if got := BaseName(in); got != want {
			t.Errorf("BaseName(%q) = %q, want %q", in, got, want)
		}
	}
}

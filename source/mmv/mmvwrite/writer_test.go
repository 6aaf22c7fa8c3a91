package mmvwrite_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/pcp-exporter/pcp-exporter/source/mmv/internal/layout"
	"github.com/pcp-exporter/pcp-exporter/source/mmv/internal/mmvcorpus"
	"github.com/pcp-exporter/pcp-exporter/source/mmv/mmvwrite"
)

const corpusDir = "../../../testdata/pcp-corpus/mmv"

// cstr returns the NUL-terminated text of the n-byte field at off (at most
// n-1 bytes), "" when the field is not inside b.
func cstr(b []byte, off, n uint64) string {
	if off > uint64(len(b)) || n > uint64(len(b))-off {
		return ""
	}
	f := b[off : off+n-1]
	if i := bytes.IndexByte(f, 0); i >= 0 {
		f = f[:i]
	}
	return string(f)
}

// TestWriterByteCompatible rewrites every corpus file with Writer, from the
// definitions of the C program that produced it, copies its values, and
// compares the bytes with the file libpcp_mmv wrote. Only the generation,
// the PID, the start time of an open ELAPSED interval and the bytes after
// a label's NUL (uninitialised heap memory in libpcp_mmv) may differ.
func TestWriterByteCompatible(t *testing.T) {
	wantVersion := map[string]int{"corpusv1": 1, "corpusv2": 2, "corpusv3": 3, "corpussentinel": 1}
	for name, cfg := range mmvcorpus.Configs {
		t.Run(name, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join(corpusDir, "files", name))
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), name)
			w, err := mmvwrite.New(path, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if w.Version() != wantVersion[name] {
				t.Errorf("version %d, want %d", w.Version(), wantVersion[name])
			}
			// Copy the values of the corpus file through the Writer's API:
			// every value entry (also a sentinel's, which the reader does
			// not export) lives at the same offset in both files, as the
			// comparison below checks.
			var mask [][2]int
			for _, h := range mmvwrite.ValueSlots(w) {
				at := h.Off
				if at+layout.ValueSize > uint64(len(want)) {
					t.Fatalf("value entry at %d past the end of the %d-byte corpus file", at, len(want))
				}
				raw, extra := layout.NE.Uint64(want[at:]), int64(layout.NE.Uint64(want[at+8:]))
				switch {
				case h.Type == mmvwrite.TypeString:
					if err := h.SetString(cstr(want, uint64(extra), mmvwrite.StringMax)); err != nil {
						t.Fatal(err)
					}
				case h.Type == mmvwrite.TypeElapsed && extra < 0:
					h.IntervalStart()
					if got := int64(layout.NE.Uint64(mmvwrite.Mapped(w)[at+8:])); got >= 0 {
						t.Errorf("value entry at %d: IntervalStart left extra = %d, want a negative start time", at, got)
					}
					h.SetRaw(raw, extra)
					mask = append(mask, [2]int{int(at + 8), int(at + 16)})
				default:
					h.SetRaw(raw, extra)
				}
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("file of %d bytes, libpcp_mmv wrote %d", len(got), len(want))
			}
			mask = append(mask, [2]int{8, 24}, [2]int{32, 36})
			for i := uint64(0); i < uint64(len(cfg.Labels)); i++ {
				// labels are the last section
				at := uint64(len(want)) - uint64(len(cfg.Labels)-int(i))*layout.LabelSize
				n := bytes.IndexByte(want[at+12:at+layout.LabelSize], 0)
				mask = append(mask, [2]int{int(at) + 12 + n, int(at + layout.LabelSize)})
			}
			for _, r := range mask {
				copy(got[r[0]:r[1]], want[r[0]:r[1]])
			}
			if !bytes.Equal(got, want) {
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("first difference at byte offset %d: got %#x, libpcp_mmv wrote %#x\ngot  % x\nwant % x",
							i, got[i], want[i], got[i&^15:min(i&^15+32, len(got))], want[i&^15:min(i&^15+32, len(want))])
					}
				}
			}
		})
	}
}

package pcplog

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/pcp-exporter/pcp-exporter/semantics"
)

// corpusFiles returns the plain corpus files with the given extension.
func corpusFiles(t testing.TB, ext string) [][]byte {
	var out [][]byte
	paths, _ := filepath.Glob(filepath.Join(corpus, "archives", "*", "*"+ext))
	more, _ := filepath.Glob(filepath.Join(corpus, "archives", "*", "*", "*"+ext))
	for _, p := range append(paths, more...) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	if len(out) == 0 {
		t.Fatalf("no corpus %s files", ext)
	}
	return out
}

func FuzzLabel(f *testing.F) {
	for _, b := range corpusFiles(f, ".meta") {
		f.Add(b[:min(len(b), LabelLenV3)])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := ParseLabel("f", b)
		if err == nil && l.Version != 2 && l.Version != 3 {
			t.Fatalf("version %d accepted", l.Version)
		}
	})
}

// FuzzMeta parses .meta contents after the label and queries the result.
func FuzzMeta(f *testing.F) {
	for _, b := range corpusFiles(f, ".meta") {
		v := int(b[7])
		f.Add(b[LabelSize(v):])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m := newMeta()
		n, err := m.parse("f", b)
		if n < 0 || n > len(b) {
			t.Fatalf("consumed %d of %d", n, len(b))
		}
		if err != nil {
			if _, ok := err.(*FormatError); !ok {
				t.Fatalf("error %T: %v", err, err)
			}
		}
		a := &Archive{base: "f", label: Label{Version: 3, Hostname: "h"}, openVolume: openStream}
		a.st.Store(&state{meta: m})
		for _, mt := range a.Metrics() {
			a.Instances(mt.Desc.InDom)
			a.InstanceLabels(mt.Desc.InDom)
		}
		for in := range m.indoms {
			a.InstancesAt(in, a.label.Start)
		}
	})
}

func FuzzIndex(f *testing.F) {
	for _, b := range corpusFiles(f, ".index") {
		v := int(b[7])
		f.Add(byte(v), b[LabelSize(v):])
	}
	f.Fuzz(func(t *testing.T, v byte, b []byte) {
		ver := 2 + int(v&1)
		es, n := ParseIndex(b, ver)
		if n > len(b) || len(es)*IndexEntrySize(ver) != n {
			t.Fatalf("%d entries, %d bytes consumed of %d", len(es), n, len(b))
		}
	})
}

// fuzzMeta is the metadata of several corpus archives, so that records of
// any of them decode with their real types.
func fuzzMeta(t testing.TB) *meta {
	m := newMeta()
	for _, name := range []string{"types/types", "live/live", "mmvchurn/mmvchurn", "indoms/indoms"} {
		b, err := os.ReadFile(filepath.Join(corpus, "archives", name+".meta"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.parse("meta", b[LabelLenV2:]); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// memArchive is an archive whose single volume is the label of version v
// followed by data, read from memory.
func memArchive(m *meta, v int, data []byte) *Archive {
	lsz := LabelSize(v)
	vol := make([]byte, lsz, lsz+len(data))
	binary.BigEndian.PutUint32(vol, uint32(lsz))
	binary.BigEndian.PutUint32(vol[4:], uint32(Magic|v))
	binary.BigEndian.PutUint32(vol[lsz-4:], uint32(lsz))
	vol = append(vol, data...)
	a := &Archive{base: "mem", label: Label{Version: v}}
	a.openVolume = func(path string) (*stream, error) {
		return &stream{path: path, r: bytes.NewReader(vol), close: func() error { return nil }}, nil
	}
	a.st.Store(&state{meta: m, vols: []volumeFile{{0, "mem.0"}}})
	return a
}

// FuzzVolume decodes the records of a data volume (after its label).
func FuzzVolume(f *testing.F) {
	m := fuzzMeta(f)
	for _, b := range corpusFiles(f, ".0") {
		v := int(b[7])
		f.Add(byte(v), b[LabelSize(v):])
	}
	f.Fuzz(func(t *testing.T, v byte, data []byte) {
		a := memArchive(m, 2+int(v&1), data)
		r := a.Records()
		defer r.Close()
		var buf []byte
		for r.Next() {
			rec := r.Record()
			if rec.Off < int64(LabelSize(a.label.Version)) || rec.Off >= int64(LabelSize(a.label.Version)+len(data)) {
				t.Fatalf("record offset %d outside the volume", rec.Off)
			}
			for _, s := range rec.Sets {
				for _, iv := range s.Values {
					buf = semantics.AppendJSON(buf[:0], iv.Value)
				}
			}
		}
		if err := r.Err(); err != nil {
			if _, ok := err.(*FormatError); !ok {
				t.Fatalf("error %T: %v", err, err)
			}
		}
		// restricted to every other metric: visiting only the kept sets
		// of records laid out alike gives what walking every set gives
		run := func(walkAll, text bool) (uint64, string) {
			r := a.Records()
			defer r.Close()
			r.Only(func(p semantics.PMID) bool { return p%2 == 0 })
			r.walkAll = walkAll
			var h uint64 = 14695981039346656037
			mix := func(x uint64) { h = (h ^ x) * 1099511628211 }
			var out []byte
			for r.Next() {
				rec := r.Record()
				mix(uint64(rec.Time.UnixNano()))
				mix(uint64(rec.Off))
				if rec.Mark {
					mix(1)
				}
				if text {
					out = fmt.Appendf(out, "%d %v %d|", rec.Time.UnixNano(), rec.Mark, rec.Off)
				}
				for _, s := range rec.Sets {
					mix(uint64(s.PMID))
					if s.Err != nil {
						mix(2)
					}
					if text {
						out = fmt.Appendf(out, "%s %v:", s.PMID, s.Err)
					}
					for _, iv := range s.Values {
						mix(uint64(iv.Inst))
						mix(iv.Value.Bits())
						for _, c := range iv.Value.Bytes() {
							mix(uint64(c))
						}
						if text {
							out = fmt.Appendf(out, "%d=", iv.Inst)
							out = semantics.AppendJSON(out, iv.Value)
						}
					}
				}
			}
			if err := r.Err(); err != nil {
				for _, c := range []byte(err.Error()) {
					mix(uint64(c))
				}
				out = append(out, err.Error()...)
			}
			return h, string(out)
		}
		if walked, _ := run(true, false); walked != func() uint64 { h, _ := run(false, false); return h }() {
			_, w := run(true, true)
			_, v := run(false, true)
			t.Fatalf("restricted reader: kept-sets-only visit\n%s\nset-by-set walk\n%s", v, w)
		}
	})
}

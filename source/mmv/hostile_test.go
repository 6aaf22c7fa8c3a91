package mmv

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

var updateHostile = flag.Bool("update", false, "rewrite testdata/hostile/mmv and its golden outcomes from the corpus")

// hostileDir holds crafted MMV files (made from the corpus files by
// hostileCases, regenerated with -update) and outcomes.golden.
var hostileDir = filepath.Join("..", "..", "testdata", "hostile", "mmv")

type tocEntry struct{ at, typ, count, off int }

func tocs(b []byte) []tocEntry {
	var out []tocEntry
	n := int(int32(ne.Uint32(b[24:])))
	for i := 0; i < n; i++ {
		at := headerSize + tocSize*i
		out = append(out, tocEntry{at, int(int32(ne.Uint32(b[at:]))), int(int32(ne.Uint32(b[at+4:]))), int(ne.Uint64(b[at+8:]))})
	}
	return out
}

func section(t *testing.T, b []byte, typ int) tocEntry {
	for _, e := range tocs(b) {
		if e.typ == typ {
			return e
		}
	}
	t.Fatalf("no section of type %d", typ)
	return tocEntry{}
}

func put32n(b []byte, off int, v uint32) { ne.PutUint32(b[off:], v) }
func put64n(b []byte, off int, v uint64) { ne.PutUint64(b[off:], v) }

// hostileCases each start from a corpus MMV file (made by libpcp_mmv) and
// break one thing. Names avoid '-': pmdammv would reject every metric of a
// file so named (the name prefixes the metric names).
var hostileCases = []struct {
	name, from string
	mutate     func(t *testing.T, b []byte) []byte
}{
	{"short_header", "corpusv2", func(t *testing.T, b []byte) []byte { return b[:39] }},
	{"bad_magic", "corpusv2", func(t *testing.T, b []byte) []byte { b[0] = 'X'; return b }},
	{"version_unknown", "corpusv2", func(t *testing.T, b []byte) []byte { put32n(b, 4, 99); return b }},
	{"generations_disagree", "corpusv2", func(t *testing.T, b []byte) []byte {
		put64n(b, 16, ne.Uint64(b[8:])+1)
		return b
	}},
	{"toc_count_huge", "corpusv2", func(t *testing.T, b []byte) []byte { put32n(b, 24, 0x7fffffff); return b }},
	{"toc_count_negative", "corpusv2", func(t *testing.T, b []byte) []byte { put32n(b, 24, 0x80000000); return b }},
	{"cluster_huge", "corpusv2", func(t *testing.T, b []byte) []byte { put32n(b, 36, 0x7fffffff); return b }},
	{"section_offset_past_end", "corpusv2", func(t *testing.T, b []byte) []byte {
		put64n(b, section(t, b, tocMetrics).at+8, uint64(len(b))+4096)
		return b
	}},
	{"section_offset_2p64_1", "corpusv2", func(t *testing.T, b []byte) []byte {
		put64n(b, section(t, b, tocValues).at+8, 1<<64-1)
		return b
	}},
	{"section_count_2p31_1", "corpusv2", func(t *testing.T, b []byte) []byte {
		put32n(b, section(t, b, tocValues).at+4, 0x7fffffff)
		return b
	}},
	{"section_count_negative", "corpusv2", func(t *testing.T, b []byte) []byte {
		put32n(b, section(t, b, tocInstances).at+4, 0xffffffff)
		return b
	}},
	{"section_self_referencing", "corpusv2", func(t *testing.T, b []byte) []byte {
		// the metrics section lies over the header and the TOC
		put64n(b, section(t, b, tocMetrics).at+8, 0)
		return b
	}},
	{"sections_overlap", "corpusv2", func(t *testing.T, b []byte) []byte {
		// the values section is the metrics section
		put64n(b, section(t, b, tocValues).at+8, uint64(section(t, b, tocMetrics).off))
		return b
	}},
	{"section_duplicate", "corpusv2", func(t *testing.T, b []byte) []byte {
		put32n(b, section(t, b, tocStrings).at, tocMetrics)
		return b
	}},
	{"section_type_unknown", "corpusv2", func(t *testing.T, b []byte) []byte {
		put32n(b, section(t, b, tocStrings).at, 77)
		return b
	}},
	{"v1_name_no_nul", "corpusv1", func(t *testing.T, b []byte) []byte {
		m := section(t, b, tocMetrics).off
		for i := m; i < m+NameMax; i++ {
			b[i] = 'a'
		}
		return b
	}},
	{"v2_name_offset_past_end", "corpusv2", func(t *testing.T, b []byte) []byte {
		put64n(b, section(t, b, tocMetrics).off, uint64(len(b))+8)
		return b
	}},
	{"v2_name_offset_self", "corpusv2", func(t *testing.T, b []byte) []byte {
		// the name is read from the metric entry itself
		m := section(t, b, tocMetrics).off
		put64n(b, m, uint64(m))
		return b
	}},
	{"strings_no_nul", "corpusv2", func(t *testing.T, b []byte) []byte {
		s := section(t, b, tocStrings)
		for i := s.off; i < len(b) && i < s.off+s.count*stringSize; i++ {
			b[i] = 'z'
		}
		return b
	}},
	{"help_offset_past_end", "corpusv2", func(t *testing.T, b []byte) []byte {
		m := section(t, b, tocMetrics).off
		put64n(b, m+32, uint64(len(b))+1)
		put64n(b, m+40, 1<<63)
		return b
	}},
	{"indom_instances_past_end", "corpusv2", func(t *testing.T, b []byte) []byte {
		put64n(b, section(t, b, tocInDoms).off+8, uint64(len(b))-8)
		return b
	}},
	{"indom_count_2p31_1", "corpusv2", func(t *testing.T, b []byte) []byte {
		put32n(b, section(t, b, tocInDoms).off+4, 0x7fffffff)
		return b
	}},
	{"instance_name_offset_past_end", "corpusv2", func(t *testing.T, b []byte) []byte {
		put64n(b, section(t, b, tocInstances).off+16, 1<<62)
		return b
	}},
	{"instance_indom_offset_cycle", "corpusv2", func(t *testing.T, b []byte) []byte {
		// the instance's indom is the instance itself
		i := section(t, b, tocInstances).off
		put64n(b, i, uint64(i))
		return b
	}},
	{"value_metric_offset_past_end", "corpusv2", func(t *testing.T, b []byte) []byte {
		put64n(b, section(t, b, tocValues).off+16, uint64(len(b))+100)
		return b
	}},
	{"value_metric_offset_self", "corpusv2", func(t *testing.T, b []byte) []byte {
		v := section(t, b, tocValues).off
		put64n(b, v+16, uint64(v))
		return b
	}},
	{"value_instance_offset_past_end", "corpusv2", func(t *testing.T, b []byte) []byte {
		s := section(t, b, tocValues)
		for i := 0; i < s.count; i++ {
			if ne.Uint64(b[s.off+32*i+24:]) != 0 {
				put64n(b, s.off+32*i+24, 1<<40)
				return b
			}
		}
		t.Fatal("no instance value")
		return b
	}},
	{"value_string_offset_past_end", "corpusv2", func(t *testing.T, b []byte) []byte {
		// every value's extra (a string value's slot offset) past the end
		s := section(t, b, tocValues)
		for i := 0; i < s.count; i++ {
			put64n(b, s.off+32*i+8, uint64(len(b)))
		}
		return b
	}},
	{"label_no_nul", "corpusv3", func(t *testing.T, b []byte) []byte {
		l := section(t, b, tocLabels).off
		for i := l + 12; i < l+labelSize; i++ {
			b[i] = '{'
		}
		return b
	}},
	{"label_count_huge", "corpusv3", func(t *testing.T, b []byte) []byte {
		put32n(b, section(t, b, tocLabels).at+4, 0x40000000)
		return b
	}},
	{"truncated_mid_values", "corpusv3", func(t *testing.T, b []byte) []byte {
		return b[:section(t, b, tocValues).off+40]
	}},
}

// outcome opens the file and reads all it offers, as a File and in a Dir.
func hostileOutcome(path string) string {
	f, err := OpenFile(path, Options{})
	if err != nil {
		return "error: " + err.Error()
	}
	defer f.Close()
	_ = f.Metrics() // read every metric's metadata: no panic, no hang
	var sb strings.Builder
	st := f.Status()
	fmt.Fprintf(&sb, "%d metrics", st.Metrics)
	if st.Reason != "" {
		fmt.Fprintf(&sb, "; not exported: %s", st.Reason)
	}
	for _, p := range st.Problems {
		fmt.Fprintf(&sb, "; %s", p)
	}
	return sb.String()
}

// TestHostileFiles reads every crafted MMV file of testdata/hostile/mmv:
// never a panic or a hang, open errors naming the file, skipped parts
// reported with their byte offsets, outcomes as in outcomes.golden, and the
// bytes allocated bounded by 8 times the file plus 256 kB.
func TestHostileFiles(t *testing.T) {
	fluxRetries = 3
	defer func() { fluxRetries = 50 }()
	if *updateHostile {
		if err := os.RemoveAll(hostileDir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(hostileDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, c := range hostileCases {
			b, err := os.ReadFile(filepath.Join(corpusDir, "files", c.from))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(hostileDir, c.name), c.mutate(t, b), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	var got strings.Builder
	for _, c := range hostileCases {
		path := filepath.Join(hostileDir, c.name)
		info, err := os.Stat(path)
		if err != nil {
			t.Fatalf("%v (run with -update)", err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		done := make(chan string, 1)
		go func() { done <- hostileOutcome(path) }()
		var out string
		select {
		case out = <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: reading hangs", c.name)
		}
		runtime.ReadMemStats(&after)
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(8*info.Size()+256<<10) {
			t.Errorf("%s: allocated %d bytes for a %d-byte file", c.name, alloc, info.Size())
		}
		if strings.HasPrefix(out, "error: ") && !strings.Contains(out, path) {
			t.Errorf("%s: error does not name the file: %s", c.name, out)
		}
		// the directory view must survive the file too
		dir := t.TempDir()
		b, _ := os.ReadFile(path)
		if err := os.WriteFile(filepath.Join(dir, c.name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		if d, err := OpenDir(dir, Options{}); err != nil {
			t.Errorf("%s: OpenDir: %v", c.name, err)
		} else {
			exercise(t, d)
			d.Close()
		}
		fmt.Fprintf(&got, "%s: %s\n", c.name, out)
	}
	golden := filepath.Join(hostileDir, "outcomes.golden")
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

package mmv

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pcp-exporter/pcp-exporter/semantics"
)

func units(ds, dt, dc int8, ss, st uint8, sc int8) semantics.Units {
	return semantics.Units{DimSpace: ds, DimTime: dt, DimCount: dc, ScaleSpace: ss, ScaleTime: st, ScaleCount: sc}
}

const (
	semCounter  = semantics.SemCounter
	semInstant  = semantics.SemInstant
	semDiscrete = semantics.SemDiscrete
)

// corpusConfigs are the scenarios of testdata/pcp-corpus/tools/mmvwriter.c
// (word "stats", "corpus" for v2), the program that wrote the corpus files with libpcp_mmv.
var corpusConfigs = map[string]WriterConfig{
	"corpusv1": {
		Cluster: 11,
		InDoms: []InDomDef{
			{Serial: 1, Instances: []InstanceDef{{0, "GET"}, {3, "POST"}, {10, "DELETE with space"}, {1000, "max id"}},
				OneLine: "request methods", Help: "Long help for the request methods indom.\nSecond line."},
			{Serial: 2, Instances: []InstanceDef{{1, "one"}, {2, "two"}}},
		},
		Metrics: []MetricDef{
			{"stats.i32", 1, TypeI32, semCounter, units(0, 0, 1, 0, 0, 0), 0, "32-bit signed counter", "Long help: 32-bit signed counter."},
			{"stats.u32", 2, TypeU32, semInstant, units(1, 0, 0, semantics.SpaceKByte, 0, 0), 0, "32-bit unsigned instant Kbyte", "Long help: u32."},
			{"stats.i64", 3, TypeI64, semDiscrete, units(0, 0, 0, 0, 0, 0), 0, "64-bit signed discrete", "Long help: i64 discrete, no units."},
			{"stats.u64", 4, TypeU64, semCounter, units(1, 0, 0, semantics.SpaceByte, 0, 0), 0, "64-bit unsigned counter bytes", "Long help: u64."},
			{"stats.float", 5, TypeFloat, semInstant, units(0, 1, 0, 0, semantics.TimeMSec, 0), 0, "float millisec", "Long help: float."},
			{"stats.double", 6, TypeDouble, semInstant, units(0, -1, 1, 0, semantics.TimeSec, 0), 0, "double count/sec", "Long help: double."},
			{"stats.string", 7, TypeString, semDiscrete, units(0, 0, 0, 0, 0, 0), 0, "a string value", "Long help: string."},
			{"stats.elapsed.done", 8, TypeElapsed, semCounter, units(0, 1, 0, 0, semantics.TimeUSec, 0), 0, "elapsed time, interval closed", "Closed timed interval: value is static."},
			{"stats.elapsed.running", 9, TypeElapsed, semCounter, units(0, 1, 0, 0, semantics.TimeUSec, 0), 0, "elapsed time, interval still open", "Open timed interval: pmdammv adds (now - start), so the value grows with time."},
			{"stats.requests", 10, TypeU64, semCounter, units(0, 0, 1, 0, 0, 0), 1, "requests by method", "Long help: per-method request counter."},
			{"stats.latency", 11, TypeDouble, semInstant, units(0, 1, 0, 0, semantics.TimeMSec, 0), 1, "latency by method", ""},
			{"stats.pairs", 12, TypeI32, semInstant, units(0, 0, 0, 0, 0, 0), 2, "", "Only long help text for pairs."},
			{"stats.names", 13, TypeString, semInstant, units(0, 0, 0, 0, 0, 0), 2, "per-instance strings", ""},
			{"stats.nohelp", 14, TypeU32, semInstant, units(0, 0, 0, 0, 0, 0), 0, "", ""},
		},
	},
	"corpusv2": {
		Cluster: 12, Flags: FlagNoPrefix,
		InDoms: []InDomDef{{Serial: 5, Instances: []InstanceDef{
			{7, "instance-name-that-is-longer-than-the-sixty-four-byte-limit-of-mmv-version-one-corpus"},
			{8, "second long instance name with spaces, commas and more than sixty-four bytes corpus"},
			{99999, "short"},
		}, OneLine: "long-named instances", Help: "Instances with names > 64 bytes."}},
		Metrics: []MetricDef{
			{"corpus_noprefix.a_metric_name_component_that_is_definitely_longer_than_sixty_four_bytes_in_total.counter", 1, TypeU64, semCounter, units(0, 0, 1, 0, 0, 0), 5, "long-named counter", "Counter with a metric name longer than 64 bytes."},
			{"corpus_noprefix.short_double", 2, TypeDouble, semInstant, units(1, -1, 0, semantics.SpaceMByte, semantics.TimeSec, 0), 5, "Mbyte/sec per instance", ""},
			{"corpus_noprefix.string_with_a_long_name_that_needs_the_version_two_string_section", 3, TypeString, semDiscrete, units(0, 0, 0, 0, 0, 0), 0xffffffff, "", ""},
			{"corpus_noprefix.int32", 4, TypeI32, semInstant, units(0, 1, 0, 0, semantics.TimeNSec, 0), 0, "nanoseconds", "Signed 32-bit, nanoseconds."},
		},
	},
	"corpusv3": {
		Cluster: 13, Flags: FlagProcess,
		InDoms: []InDomDef{{Serial: 3, Instances: []InstanceDef{{1, "red"}, {20, "green light"}, {300, "blue"}},
			OneLine: "labelled indom", Help: "Instance domain carrying indom and instance labels."}},
		Metrics: []MetricDef{
			{"stats.labelled.counter", 1, TypeU32, semCounter, units(0, 0, 1, 0, 0, 0), 3, "labelled counter", "U32 counter with item labels."},
			{"stats.labelled.gauge", 2, TypeFloat, semInstant, units(1, 0, 0, semantics.SpaceGByte, 0, 0), 3, "labelled gauge", ""},
			{"stats.labelled.text", 3, TypeString, semDiscrete, units(0, 0, 0, 0, 0, 0), 0xffffffff, "", ""},
			{"stats.labelled.elapsed", 4, TypeElapsed, semCounter, units(0, 1, 0, 0, semantics.TimeUSec, 0), 0xffffffff, "elapsed", "Closed interval, static value."},
		},
		Labels: []LabelDef{
			{Type: semantics.LabelCluster, Name: "app", Value: `"corpus"`},
			{Type: semantics.LabelCluster, Name: "build", Value: `42`},
			{Type: semantics.LabelCluster, Name: "debug", Value: `false`},
			{Type: semantics.LabelCluster, Name: "nothing", Value: `null`, Optional: true},
			{Type: semantics.LabelInDom, Identity: 3, Name: "palette", Value: `"rgb"`},
			{Type: semantics.LabelItem, Identity: 1, Name: "tags", Value: `["a","b",3]`},
			{Type: semantics.LabelItem, Identity: 2, Name: "limits", Value: `{"lo":0,"hi":1.5}`},
			{Type: semantics.LabelItem, Identity: 2, Name: "optional_note", Value: `"gauge"`, Optional: true},
			{Type: semantics.LabelInstances, Identity: 3, Inst: 1, Name: "wavelength_nm", Value: `700`},
			{Type: semantics.LabelInstances, Identity: 3, Inst: 20, Name: "wavelength_nm", Value: `530`},
			{Type: semantics.LabelInstances, Identity: 3, Inst: 300, Name: "primary", Value: `true`},
		},
	},
	"corpussentinel": {
		Cluster: 14, Flags: FlagSentinel,
		InDoms:  []InDomDef{{Serial: 4, Instances: []InstanceDef{{1, "set"}, {2, "sentinel"}}, OneLine: "set/unset"}},
		Metrics: sentinelMetrics(),
	},
}

func sentinelMetrics() []MetricDef {
	var ms []MetricDef
	for i, leaf := range []string{"i32", "u32", "i64", "u64", "float", "double", "string", "elapsed"} {
		typ := []MetricType{TypeI32, TypeU32, TypeI64, TypeU64, TypeFloat, TypeDouble, TypeString, TypeElapsed}[i]
		m := MetricDef{Name: "stats." + leaf, Item: uint32(i + 1), Type: typ, Sem: semInstant, InDom: 4, OneLine: "sentinel test"}
		if typ == TypeElapsed {
			m.Sem, m.Units = semCounter, units(0, 1, 0, 0, semantics.TimeUSec, 0)
		}
		ms = append(ms, m)
	}
	return ms
}

// TestWriterByteCompatible rewrites every corpus file with Writer, from the
// definitions of the C program that produced it, copies its values, and
// compares the bytes with the file libpcp_mmv wrote. Only the generation,
// the PID, the start time of an open ELAPSED interval and the bytes after
// a label's NUL (uninitialised heap memory in libpcp_mmv) may differ.
func TestWriterByteCompatible(t *testing.T) {
	wantVersion := map[string]int{"corpusv1": 1, "corpusv2": 2, "corpusv3": 3, "corpussentinel": 1}
	for name, cfg := range corpusConfigs {
		t.Run(name, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join(corpusDir, "files", name))
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), name)
			w, err := NewWriter(path, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if w.Version() != wantVersion[name] {
				t.Errorf("version %d, want %d", w.Version(), wantVersion[name])
			}
			// Copy the values of the corpus file through the Writer's API.
			orig, err := OpenFile(filepath.Join(corpusDir, "files", name), Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer orig.Close()
			var mask [][2]int
			for _, m := range orig.v.metrics {
				short := strings.TrimPrefix(m.Name, "mmv.")
				if cfg.Flags&FlagNoPrefix == 0 {
					short = strings.TrimPrefix(short, name+".")
				}
				insts := map[int32]string{}
				if in := orig.v.indoms[m.Desc.InDom]; in != nil {
					for _, x := range in.insts {
						insts[x.ID] = x.Name
					}
				}
				// Every value entry, also those the reader does not export
				// (sentinels), lives at the same offset in both files.
				for i := uint64(0); i < m.file.valsCnt; i++ {
					at := m.file.valsOff + i*valueSize
					if ne.Uint64(m.file.data[at+16:]) != m.entry {
						continue
					}
					inst := ""
					if !singular(m.indom) {
						inst = insts[int32(ne.Uint32(m.file.data[ne.Uint64(m.file.data[at+24:])+12:]))]
					}
					h, err := w.Handle(short, inst)
					if err != nil {
						t.Fatal(err)
					}
					if h.off != at {
						t.Errorf("%s[%s]: value entry at %d, libpcp_mmv put it at %d", short, inst, h.off, at)
						continue
					}
					raw, extra := ne.Uint64(m.file.data[at:]), int64(ne.Uint64(m.file.data[at+8:]))
					switch {
					case m.mtype == TypeString:
						s, _ := cstr(m.file.data, uint64(extra), StringMax)
						if err := h.SetString(string(s)); err != nil {
							t.Fatal(err)
						}
					case m.mtype == TypeElapsed && extra < 0:
						h.IntervalStart()
						if got := int64(ne.Uint64(w.data[at+8:])); got >= 0 {
							t.Errorf("%s: IntervalStart left extra = %d, want a negative start time", short, got)
						}
						h.setRaw(raw, extra)
						mask = append(mask, [2]int{int(at + 8), int(at + 16)})
					default:
						h.setRaw(raw, extra)
					}
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
				at := uint64(len(want)) - uint64(len(cfg.Labels)-int(i))*labelSize
				n := bytes.IndexByte(want[at+12:at+labelSize], 0)
				mask = append(mask, [2]int{int(at) + 12 + n, int(at + labelSize)})
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

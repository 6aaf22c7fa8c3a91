package bridge

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source/mmv"
	"github.com/pcp-exporter/pcp-exporter/source/mmv/mmvwrite"
)

// TestRecreatedWithOtherDesc: an MMV file re-created under the same name
// with the same metric names (so the same PMIDs) but other units, semantics
// or type is mapped anew: the family follows the new descriptor. Before, the
// metric set's signature hashed only names and PMIDs, and a count gauge of 7
// was served as the old Kbyte counter, mmv_a_value_bytes_total 7168.
func TestRecreatedWithOtherDesc(t *testing.T) {
	for _, tc := range []struct {
		name        string
		first, then mmvwrite.MetricDef
		want        string // the exposition's line after the re-creation
	}{
		{"Kbyte counter to count gauge",
			mmvwrite.MetricDef{Name: "value", Item: 1, Type: mmvwrite.TypeU64, Sem: semantics.SemCounter, Units: semantics.Units{DimSpace: 1, ScaleSpace: 1}},
			mmvwrite.MetricDef{Name: "value", Item: 1, Type: mmvwrite.TypeU64, Sem: semantics.SemInstant, Units: semantics.Units{DimCount: 1}},
			"mmv_a_value 7"},
		{"millisecond counter to second counter",
			mmvwrite.MetricDef{Name: "value", Item: 1, Type: mmvwrite.TypeU64, Sem: semantics.SemCounter, Units: semantics.Units{DimTime: 1, ScaleTime: 2}},
			mmvwrite.MetricDef{Name: "value", Item: 1, Type: mmvwrite.TypeU64, Sem: semantics.SemCounter, Units: semantics.Units{DimTime: 1, ScaleTime: 3}},
			"mmv_a_value_seconds_total 7"},
		{"u64 to double",
			mmvwrite.MetricDef{Name: "value", Item: 1, Type: mmvwrite.TypeU64, Sem: semantics.SemInstant, Units: semantics.Units{DimCount: 1}},
			mmvwrite.MetricDef{Name: "value", Item: 1, Type: mmvwrite.TypeDouble, Sem: semantics.SemInstant, Units: semantics.Units{DimCount: 1}},
			"mmv_a_value 7.5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "a")
			write := func(def mmvwrite.MetricDef, set func(mmvwrite.Handle)) {
				w, err := mmvwrite.New(path, mmvwrite.Config{Metrics: []mmvwrite.MetricDef{def}})
				if err != nil {
					t.Fatal(err)
				}
				set(w.MustHandle("value", ""))
				w.Close()
			}
			write(tc.first, func(h mmvwrite.Handle) { h.SetUint64(3) })
			d, err := mmv.OpenDir(dir, mmv.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			c := New(mapper(t, 0), nil, Source{Name: dir, Src: d})
			var b strings.Builder
			if err := c.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			write(tc.then, func(h mmvwrite.Handle) {
				if tc.then.Type == mmvwrite.TypeDouble {
					h.SetFloat(7.5)
				} else {
					h.SetUint64(7)
				}
			})
			b.Reset()
			if err := c.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, l := range strings.Split(b.String(), "\n") {
				if strings.HasPrefix(l, "mmv_a_") {
					got = append(got, l)
				}
			}
			if len(got) != 1 || got[0] != tc.want {
				t.Errorf("after re-creation: %q, want %q", got, tc.want)
			}
		})
	}
}

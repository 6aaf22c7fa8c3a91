package bridge

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/mmv"
	"github.com/pcp-exporter/pcp-exporter/source/mmv/mmvwrite"
)

// writeInsts writes an MMV file "app" with one gauge over instances 1 and 2
// named as given.
func writeInsts(t *testing.T, dir string, names ...string) *mmvwrite.Writer {
	t.Helper()
	w, err := mmvwrite.New(filepath.Join(dir, "app"), mmvwrite.Config{
		InDoms:  []mmvwrite.InDomDef{{Serial: 1, Instances: []mmvwrite.InstanceDef{{ID: 1, Name: names[0]}, {ID: 2, Name: names[1]}}}},
		Metrics: []mmvwrite.MetricDef{{Name: "queue", Item: 1, Type: mmvwrite.TypeU64, Sem: semantics.SemInstant, InDom: 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range names {
		w.MustHandle("queue", n).SetUint64(uint64(10 + i))
	}
	return w
}

// renamedInstances serves a source's values with other instance names (an
// archive in which a PID came back as another process); it has no epoch.
type renamedInstances struct {
	source.Source
	names map[int32]string
}

func (r *renamedInstances) Instances(indom semantics.InDom) []source.Instance {
	ins := r.Source.Instances(indom)
	for i := range ins {
		if n, ok := r.names[ins[i].ID]; ok {
			ins[i].Name = n
		}
	}
	return ins
}

// TestTextCacheInstanceNames: the text path caches each series' labels
// between scrapes; an instance id that comes back with another name (a
// re-created MMV file, or a source without epochs) must be served with its
// new name, as the registry path (no cache) serves it.
func TestTextCacheInstanceNames(t *testing.T) {
	text := func(c *Collector) string {
		var b bytes.Buffer
		if err := c.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	check := func(out string, want, gone []string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("missing %s in:\n%s", w, out)
			}
		}
		for _, g := range gone {
			if strings.Contains(out, g) {
				t.Errorf("stale %s in:\n%s", g, out)
			}
		}
	}

	t.Run("re-created MMV file", func(t *testing.T) {
		dir := t.TempDir()
		w := writeInsts(t, dir, "alpha", "beta")
		d, err := mmv.OpenDir(dir, mmv.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		c := New(mapper(t, 0), nil, Source{Name: "mmv", Src: d})
		check(text(c), []string{`mmv_app_queue{agent="mmv",instname="alpha"} 10`, `mmv_app_queue{agent="mmv",instname="beta"} 11`}, nil)
		w.Close()
		w = writeInsts(t, dir, "gamma", "delta")
		defer w.Close()
		check(text(c), []string{`mmv_app_queue{agent="mmv",instname="gamma"} 10`, `mmv_app_queue{agent="mmv",instname="delta"} 11`}, []string{"alpha", "beta"})
	})

	t.Run("source without epochs", func(t *testing.T) {
		dir := t.TempDir()
		w := writeInsts(t, dir, "alpha", "beta")
		defer w.Close()
		f, err := mmv.OpenFile(filepath.Join(dir, "app"), mmv.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		r := &renamedInstances{Source: f}
		if _, ok := source.Source(r).(source.Epoched); ok {
			t.Fatal("the wrapper must hide the file's epoch")
		}
		c := New(mapper(t, 0), nil, Source{Name: "archive", Src: r})
		check(text(c), []string{`mmv_app_queue{agent="mmv",instname="alpha"} 10`}, nil)
		r.names = map[int32]string{1: "alpha2"}
		check(text(c), []string{`mmv_app_queue{agent="mmv",instname="alpha2"} 10`, `mmv_app_queue{agent="mmv",instname="beta"} 11`}, []string{`instname="alpha"}`})
	})
}

package mapping

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

func TestConfigErrors(t *testing.T) {
	cases := []struct{ yaml, err string }{
		{"naming: pmproxy\nbogus: 1\n", "line 2: field bogus not found in type mapping.Config"},
		{"naming: fancy\n", `line 1: unknown naming "fancy" (want default, pmproxy, node or hostmetrics)`},
		{"include:\n  - 'mmv.*'\n  - '/a(/'\n", "line 3: bad regular expression \"/a(/\""},
		{"exclude: ['[a-']\n", `line 1: metric pattern "[a-": [ at offset 0 is not closed`},
		{"rename:\n  - match: x\n    nme: y\n", "line 3: field nme not found in rename rule"},
		{"rename:\n  - match: x\n", "line 2: rename rule without name"},
		{"rename:\n  - name: y\n", "line 2: rename rule without match"},
		{"rename:\n  - {match: x, name: 'a-b'}\n", `line 2: rename: "a-b" is not a valid Prometheus metric name`},
		{"\n\ndrop_labels: [ok, 'not ok']\n", `line 3: drop_labels: "not ok" is not a valid label name`},
		{"instid: maybe\n", "line 1: cannot unmarshal !!str `maybe` into bool"},
		{"naming: [x]\n", "line 1: cannot unmarshal !!seq into string"},
	}
	for _, c := range cases {
		_, err := ParseConfig([]byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%q: error %v, want %q", c.yaml, err, c.err)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error on several lines: %q", c.yaml, err)
		}
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "m.yml")
	os.WriteFile(file, []byte("x: 1\n"), 0o644)
	if _, err := LoadConfig(file); err == nil || !strings.HasPrefix(err.Error(), file+": line 1: ") {
		t.Errorf("LoadConfig error %v", err)
	}
	if c, err := ParseConfig(nil); err != nil || c.Naming != "" {
		t.Errorf("empty config: %v %v", c, err)
	}
}

func TestConfigSelectRename(t *testing.T) {
	cfg, err := LoadConfig("../testdata/mapping/example.yml")
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := desc(semantics.TypeU64, semantics.SemCounter, kbyte)
	cases := []struct{ pcp, name string }{
		{"kernel.all.load", "node_load"},
		{"kernel.all.pswitch", "node_pswitch_total"},
		{"disk.dev.read_bytes", "disk_dev_read_bytes_total"},
		{"mmv.app.x", "mmv_app_x_bytes_total"},
		{"mmv.control.reload", ""},
		{"proc.nprocs", ""},
		{"kernel.percpu.cpu.user", ""},
	}
	for _, c := range cases {
		dd := d
		if c.pcp == "kernel.all.load" || c.pcp == "kernel.all.pswitch" {
			dd = desc(semantics.TypeU64, semantics.SemCounter, semantics.Units{})
			if c.pcp == "kernel.all.load" {
				dd.Sem = semantics.SemInstant
			}
		}
		f, why := m.Map(&source.Metric{Name: c.pcp, Desc: dd})
		if c.name == "" {
			if why != SkipExcluded {
				t.Errorf("%s: %q, want excluded", c.pcp, why)
			}
			continue
		}
		if f.Name != c.name {
			t.Errorf("%s: %q (%s), want %q", c.pcp, f.Name, why, c.name)
		}
	}
	if m.Naming() != NamingDefault {
		t.Errorf("naming %v", m.Naming())
	}
}

func TestGlob(t *testing.T) {
	cases := []struct {
		pat, name string
		ok        bool
	}{
		{"mmv.*", "mmv.a.b", true},
		{"mmv.*", "mmvx", false},
		{"mmv.?", "mmv.a", true},
		{"mmv.[ab]", "mmv.b", true},
		{"mmv.[!ab]", "mmv.b", false},
		{"a+b", "a+b", true},
		{"a+b", "aab", false},
		{"/^k.*load$/", "kernel.all.load", true},
		{"/load/", "kernel.all.load.x", true},
	}
	for _, c := range cases {
		p, err := ParsePattern(c.pat)
		if err != nil {
			t.Fatal(err)
		}
		if p.Match(c.name) != c.ok {
			t.Errorf("%q ~ %q: %v", c.pat, c.name, !c.ok)
		}
	}
}

package bridge

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/archive"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
	"github.com/pcp-exporter/pcp-exporter/source/mmv"
)

var update = flag.Bool("update", false, "rewrite the golden files")

const corpus = "../testdata/pcp-corpus"

func mapper(t testing.TB, naming mapping.Naming) *mapping.Mapper {
	m, err := mapping.New(nil, mapping.Options{With: mapping.LeanNames(), Naming: &naming})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// exposition gathers a collector into the text format 0.0.4.
func exposition(t testing.TB, c prometheus.Collector) []byte {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

// volatile lines: MMV values that change by themselves (the running ELAPSED
// interval) and the fetch duration self-metric.
var volatile = regexp.MustCompile(`(?m)^([a-z_0-9]*elapsed_running[a-z_]*|pcp_exporter_source_fetch_duration_seconds)(\{[^}]*\})? .*$`)

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	got = volatile.ReplaceAll(got, []byte("$1$2 <volatile>"))
	path := filepath.Join("..", "testdata", "golden", "bridge", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs from the golden file (go test ./bridge -update rewrites it):\n%s", name, lineDiff(string(want), string(got)))
	}
}

func lineDiff(want, got string) string {
	w := strings.Split(want, "\n")
	g := strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < len(w) || i < len(g); i++ {
		var a, c string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			c = g[i]
		}
		if a != c {
			b.WriteString("- " + a + "\n+ " + c + "\n")
			if b.Len() > 2000 {
				break
			}
		}
	}
	return b.String()
}

// corpusSources are the golden cases: every corpus MMV file and a replay of
// a few corpus archives at fixed times.
func corpusSources(t *testing.T) map[string]func() Source {
	out := map[string]func() Source{}
	for _, name := range []string{"corpusv1", "corpusv2", "corpusv3", "corpussentinel"} {
		path := filepath.Join(corpus, "mmv", "files", name)
		out["mmv-"+name] = func() Source {
			f, err := mmv.OpenFile(path, mmv.Options{PIDCheck: false})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			return Source{Name: name, Src: f}
		}
	}
	for _, c := range []struct {
		name, arch string
		at         time.Duration
	}{
		{"seedtables", "seedtables/seedtables", 25 * time.Second},
		{"types", "types/types", 12500 * time.Millisecond},
		{"indoms", "indoms/indoms", 40 * time.Second},
		{"live", "live/live", 90 * time.Second},
	} {
		out["archive-"+c.name] = func() Source {
			a, err := pcplog.Open(filepath.Join(corpus, "archives", c.arch))
			if err != nil {
				t.Fatal(err)
			}
			rp, err := archive.NewReplay([]*pcplog.Archive{a}, archive.ReplayOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { rp.Close() })
			at := rp.Start().Add(c.at)
			return Source{Name: c.name, Src: rp, When: func(time.Time) (time.Time, bool) { return at, true }}
		}
	}
	return out
}

// TestGoldenExposition checks the /metrics exposition of every corpus MMV
// file and of archive replays, with both namings, against golden files, and
// (default naming) that promtool's linter finds nothing to say.
func TestGoldenExposition(t *testing.T) {
	full := true
	for name, open := range corpusSources(t) {
		for _, v := range []struct {
			name string
			opts mapping.Options
		}{
			{"default", mapping.Options{With: mapping.LeanNames()}},
			{"full", mapping.Options{With: mapping.LeanNames(), FullLabels: &full}}, // the labels before lean labels
			{"pmproxy", mapping.Options{With: mapping.LeanNames(), Naming: &pmproxyNaming}},
		} {
			t.Run(name+"/"+v.name, func(t *testing.T) {
				m, err := mapping.New(nil, v.opts)
				if err != nil {
					t.Fatal(err)
				}
				c := New(m, nil, open())
				out := exposition(t, c)
				golden(t, name+"."+v.name+".prom", out)
				if m.Naming() == mapping.NamingDefault {
					promtoolCheck(t, out)
				}
			})
		}
	}
}

var pmproxyNaming = mapping.NamingPmproxy

func promtoolCheck(t *testing.T, exposition []byte) {
	t.Helper()
	bin := e2e.Require(t, "promtool")[0]
	cmd := exec.Command(bin, "check", "metrics")
	cmd.Stdin = bytes.NewReader(exposition)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// TestSeedtablesValues checks a few mapped families by value against
// the corpus README's tables (seedtables at t=20s: counter 720, instant
// 880, discrete 880).
func TestSeedtablesValues(t *testing.T) {
	a, err := pcplog.Open(filepath.Join(corpus, "archives", "seedtables", "seedtables"))
	if err != nil {
		t.Fatal(err)
	}
	rp, err := archive.NewReplay([]*pcplog.Archive{a}, archive.ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rp.Close()
	at := rp.Start().Add(10 * time.Second) // the archive starts at the 10 s sample
	c := New(mapper(t, mapping.NamingDefault), nil, Source{Name: "seed", Src: rp, When: func(time.Time) (time.Time, bool) { return at, true }})
	out := string(exposition(t, c))
	for _, want := range []string{
		"# TYPE seed_total counter\n",
		"seed_total 720\n",
		"# TYPE seed_instant gauge\n",
		"seed_instant 880\n",
		"seed_discrete 880\n",
		"pcp_exporter_source_up{reason=\"\",source=\"seed\"} 1\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("exposition lacks %q:\n%s", want, out)
		}
	}
}

// TestSourceErrorCounted checks that a failing source reports up 0 and
// counts the error while the others are served.
func TestSourceErrorCounted(t *testing.T) {
	a, err := pcplog.Open(filepath.Join(corpus, "archives", "seedtables", "seedtables"))
	if err != nil {
		t.Fatal(err)
	}
	rp, err := archive.NewReplay([]*pcplog.Archive{a}, archive.ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rp.Close()
	before := rp.Start().Add(-time.Hour) // PM_ERR_EOL
	c := New(mapper(t, mapping.NamingDefault), nil, Source{Name: "early", Src: rp, When: func(time.Time) (time.Time, bool) { return before, true }})
	out := string(exposition(t, c))
	for _, want := range []string{`pcp_exporter_source_up{reason="error",source="early"} 0`, `pcp_exporter_source_errors_total{source="early"} 1`} {
		if !strings.Contains(out, want) {
			t.Errorf("exposition lacks %q:\n%s", want, out)
		}
	}
	select {
	case <-c.Ready():
		t.Error("ready although the only source failed")
	default:
	}
}

var _ source.Source = (*archive.Replay)(nil) // the replay serves as any source

package derive

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

// metaSource is an archive's metadata as a source (no values): enough to
// bind derived metrics and check their descriptors.
type metaSource struct{ a *pcplog.Archive }

func (m metaSource) Metrics() []source.Metric                      { return m.a.Metrics() }
func (m metaSource) Instances(i semantics.InDom) []source.Instance { return m.a.Instances(i) }
func (m metaSource) Close() error                                  { return m.a.Close() }
func (m metaSource) Fetch(time.Time, []semantics.PMID, *source.Result) error {
	return fmt.Errorf("metadata only")
}

// corpusFamilies maps a family of derived_list.tsv to its archive.
var corpusFamilies = map[string]string{
	"seedtables": "archives/seedtables/seedtables",
	"indoms":     "archives/indoms/indoms",
	"types":      "archives/types/types",
	"live":       "archives/live/live",
}

// familyNames reads derived_list.tsv: the derived metrics of each family in
// config order (the order of the pminfo command lines).
func familyNames(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open("derived/derived_list.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fam, name, ok := strings.Cut(sc.Text(), "\t")
		if ok {
			out[fam] = append(out[fam], name)
		}
	}
	return out
}

var pminfoTypes = map[semantics.Type]string{
	semantics.Type32: "32-bit int", semantics.TypeU32: "32-bit unsigned int", semantics.Type64: "64-bit int",
	semantics.TypeU64: "64-bit unsigned int", semantics.TypeFloat: "float", semantics.TypeDouble: "double",
	semantics.TypeString: "string",
}

// pminfoDesc formats a descriptor as pminfo -d (PCP 6.0.3) prints it.
func pminfoDesc(d semantics.Desc) string {
	indom := "PM_INDOM_NULL 0xffffffff"
	if d.InDom != semantics.InDomNull {
		indom = fmt.Sprintf("%s 0x%x", d.InDom, uint32(d.InDom))
	}
	u := d.Units.StringPCP6()
	if u == "" {
		u = "none"
	}
	return fmt.Sprintf("    Data Type: %s  InDom: %s\n    Semantics: %s  Units: %s\n", pminfoTypes[d.Type], indom, d.Sem, u)
}

func openWrapped(t *testing.T, fam, config string) (*Source, []source.Metric) {
	t.Helper()
	a, err := pcplog.Open(corpusFamilies[fam])
	if err != nil {
		t.Fatal(err)
	}
	defs, errs := LoadConfig(config)
	if len(errs) > 0 && config == "derived/derived.conf" {
		t.Fatal(errs)
	}
	w, err := Wrap(metaSource{a}, defs, nil)
	if err != nil {
		t.Fatal(err)
	}
	return w, w.Metrics()
}

// TestCorpusDescriptors compares the derived descriptors (type, indom,
// semantics, units) and PMIDs with pminfo -dmT for every family.
func TestCorpusDescriptors(t *testing.T) {
	t.Chdir("../testdata/pcp-corpus")
	names := familyNames(t)
	for fam := range corpusFamilies {
		t.Run(fam, func(t *testing.T) {
			_, ms := openWrapped(t, fam, "derived/derived.conf")
			byName := map[string]source.Metric{}
			for _, m := range ms {
				byName[m.Name] = m
			}
			var got strings.Builder
			for _, n := range names[fam] {
				m, ok := byName[n]
				if !ok {
					t.Errorf("%s: not defined", n)
					continue
				}
				fmt.Fprintf(&got, "\n%s PMID: %s\n%sFull Help: Error: One-line or help text is not available\n", n, m.Desc.PMID, pminfoDesc(m.Desc))
			}
			want, err := os.ReadFile("derived/expected/" + fam + ".pminfo-dmT.txt")
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != string(want) {
				t.Errorf("got:\n%s\npminfo:\n%s", got.String(), want)
			}
		})
	}
}

// TestCorpusSemanticErrors loads derived_semantic.conf over the seedtables
// and types archives and compares with pminfo -d: which definitions fail,
// the descriptor of those that do not, and the semantic errors on stderr.
func TestCorpusSemanticErrors(t *testing.T) {
	t.Chdir("../testdata/pcp-corpus")
	var names []string
	f, err := os.ReadFile("derived/derived_semantic.conf")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(f), "\n") {
		if n, _, ok := strings.Cut(line, " = "); ok && !strings.HasPrefix(line, "#") {
			names = append(names, n)
		}
	}
	for _, fam := range []string{"seedtables", "types"} {
		t.Run(fam, func(t *testing.T) {
			w, ms := openWrapped(t, fam, "derived/derived_semantic.conf")
			byName := map[string]source.Metric{}
			for _, m := range ms {
				byName[m.Name] = m
			}
			var out, stderr strings.Builder
			for _, n := range names {
				if m, ok := byName[n]; ok {
					fmt.Fprintf(&out, "\n%s\n%s", n, pminfoDesc(m.Desc))
				} else {
					fmt.Fprintf(&out, "%s: pmLookupDesc: Derived metric definition failed\n", n)
				}
			}
			for _, e := range w.Errors() {
				stderr.WriteString(e.Error() + "\n")
			}
			for _, c := range []struct{ got, file string }{
				{out.String(), "derived/expected/semantic." + fam + ".pminfo-d.txt"},
				{stderr.String(), "derived/expected/semantic." + fam + ".pminfo-d.txt.stderr"},
			} {
				want, err := os.ReadFile(c.file)
				if err != nil {
					t.Fatal(err)
				}
				if c.got != string(want) {
					t.Errorf("%s: got:\n%s\npminfo:\n%s", c.file, c.got, want)
				}
			}
		})
	}
}

package derive

import (
	"bufio"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// TestUnitScaling evaluates the derived metrics of testdata/rescale.tsv,
// written by libpcp (testdata/rescale.py, python3-pcp 6.0.3; -update runs
// it again): rescale() of constants of every numeric type between units of
// space, time and count (pmConvScale's integer rounding and overflow, float
// precision), and +, -, *, /, <, ==, > of operands of different scales
// (map_units' scaling, which makes the result DOUBLE, and comparisons,
// which do not scale). The descriptor's type and units and the value must
// be libpcp's, bit for bit; a definition libpcp refuses must be refused.
func TestUnitScaling(t *testing.T) {
	const golden = "testdata/rescale.tsv"
	if *update {
		writeGolden(t, golden, "rescale.py", "../../testdata/pcp-corpus/archives/types/types")
	}
	f, err := os.Open(golden)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type row struct{ line, name, expr, want string }
	var rows []row
	var defs []Definition
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		if strings.HasPrefix(sc.Text(), "#") {
			continue
		}
		col := strings.Split(sc.Text(), "\t")
		if len(col) != 5 {
			t.Fatalf("%s:%d: %d columns", golden, line, len(col))
		}
		r := row{line: golden + ":" + itoa(line), name: col[0], expr: col[1], want: strings.Join(col[2:], " ")}
		if col[2] == "error" {
			r.want = "error"
		}
		rows = append(rows, r)
		if e, err := Parse(col[1]); err == nil {
			defs = append(defs, Definition{Name: col[0], Expr: e})
		}
	}
	if len(rows) < 1000 {
		t.Fatalf("%s: %d rows", golden, len(rows))
	}
	w, err := Wrap(&fakeSource{}, defs, nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]semantics.Desc{}
	var pmids []semantics.PMID
	for _, m := range w.Metrics() {
		if strings.HasPrefix(m.Name, "r.m") {
			byName[m.Name] = m.Desc
			pmids = append(pmids, m.Desc.PMID)
		}
	}
	var res source.Result
	if err := w.Fetch(time.Unix(1700000000, 0), pmids, &res); err != nil {
		t.Fatal(err)
	}
	got := map[semantics.PMID]string{}
	for _, vs := range res.Sets {
		switch {
		case vs.Err != nil:
			got[vs.PMID] = "fetch error " + vs.Err.Error()
		case len(vs.Values) == 0:
			got[vs.PMID] = "no values"
		default:
			got[vs.PMID] = formatCSVValue(vs.Values[0].Value)
		}
	}
	bad := 0
	for _, r := range rows {
		g := "error"
		if d, ok := byName[r.name]; ok {
			g = csvTypeName(d.Type) + " " + d.Units.StringPCP6() + " " + got[d.PMID]
		}
		if g != r.want {
			if bad++; bad <= 20 {
				t.Errorf("%s: %s\n got  %s\n want %s", r.line, r.expr, g, r.want)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d derived metrics differ from libpcp", bad, len(rows))
	}
}

package derive

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
)

// corpusErrorCase is one row of derived_errors.tsv: what PCP 6.0.3's
// pmRegisterDerived and pmRegisterDerivedMetric said about an expression.
type corpusErrorCase struct {
	name, expr string
	accepted   bool
	pos        int
	msg        string
	report     string
}

func readErrorCases(t *testing.T) []corpusErrorCase {
	t.Helper()
	f, err := os.Open("../testdata/pcp-corpus/derived/derived_errors.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []corpusErrorCase
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		col := strings.Split(sc.Text(), "\t")
		if len(col) != 7 {
			t.Fatalf("bad row %q", sc.Text())
		}
		c := corpusErrorCase{name: col[1], accepted: col[3] == "yes", msg: col[5]}
		if err := json.Unmarshal([]byte(col[2]), &c.expr); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(col[6]), &c.report); err != nil {
			t.Fatal(err)
		}
		if !c.accepted {
			if c.pos, err = strconv.Atoi(col[4]); err != nil {
				t.Fatal(err)
			}
		}
		cases = append(cases, c)
	}
	return cases
}

// TestCorpusSyntaxErrors checks every expression of derived_errors.tsv: the
// position and pmDerivedErrStr text of pmRegisterDerived, and the message of
// pmRegisterDerivedMetric. The corpus generator registered the expressions
// one after the other in one process, so they go through one Session (the
// "seed.instant / / seed.discrete" answer depends on libpcp's lexer state
// left over from the broken matchinst( before it).
func TestCorpusSyntaxErrors(t *testing.T) {
	cases := readErrorCases(t)
	if len(cases) < 30 {
		t.Fatalf("only %d cases", len(cases))
	}
	var s Session
	for _, c := range cases {
		_, err := s.Parse(c.expr)
		if c.accepted {
			if err != nil {
				t.Errorf("%s: Parse(%q) = %v, PCP accepts it", c.name, c.expr, err)
			}
			continue
		}
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("%s: Parse(%q) = %v, want a syntax error", c.name, c.expr, err)
			continue
		}
		if se.Pos != c.pos || se.Msg != c.msg {
			t.Errorf("%s: Parse(%q): pos %d msg %q, PCP says pos %d msg %q", c.name, c.expr, se.Pos, se.Msg, c.pos, c.msg)
		}
		if got := se.Report(c.name); got != c.report {
			t.Errorf("%s: report\n%q\nPCP:\n%q", c.name, got, c.report)
		}
	}
}

// TestPrecedence checks the parse trees pcp-spec.md section 4.3 reports
// from libpcp's -Dderive,appl0 dumps.
func TestPrecedence(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"-a*b", "(-(a * b))"},
		{"-a+b", "((-a) + b)"},
		{"a?b:c?d:e", "((a ? b : c) ? d : e)"},
		{"!a>b||c<d", "((!(a > b)) || (c < d))"},
		{"a&&b||c", "((a && b) || c)"},
		{"a+b*c", "(a + (b * c))"},
		{"a-b-c", "((a - b) - c)"},
		{"a/b/c", "((a / b) / c)"},
		{"a < b + 1", "(a < (b + 1))"},
		{"(a+b)*c", "((a + b) * c)"},
		{"delta(x) / delta(y)", "(delta(x) / delta(y))"},
		{"m[inst 1]", "m[inst 1]"},
		{"matchinst(!/^a.b$/, m + 1)", "matchinst(!/^a.b$/, (m + 1))"},
		{"rescale(m, \"Kbyte/sec\")", "rescale(m, \"Kbyte/sec\")"},
		{"mkconst(12, type=64, units=\"Kbyte\") * 2", "(12 * 2)"},
		{"1.5 + .5", "(1.5 + .5)"},
	} {
		e, err := Parse(c.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.in, err)
			continue
		}
		if got := e.String(); got != c.want {
			t.Errorf("Parse(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

// TestDeepNesting checks that hostile nesting fails with a clear error
// instead of exhausting the stack.
func TestDeepNesting(t *testing.T) {
	for _, in := range []string{
		strings.Repeat("(", 100000),
		strings.Repeat("(", 100000) + "a" + strings.Repeat(")", 100000),
		strings.Repeat("-", 100000) + "a",
		strings.Repeat("!", 100000) + "a",
		"a" + strings.Repeat("+a", 100000),
	} {
		_, err := Parse(in)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Parse(%d bytes) = %v, want a syntax error", len(in), err)
			continue
		}
		if len(in) > 200000 || se.Msg == "" {
			t.Logf("%d bytes: pos %d %q", len(in), se.Pos, se.Msg)
		}
	}
}

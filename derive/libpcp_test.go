package derive

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
)

// pythonWithPCP finds a python3 that can load libpcp (python3-pcp).
func pythonWithPCP(t *testing.T) string {
	var cands []string
	if p, err := e2e.Lookup("python3"); err == nil {
		cands = append(cands, p)
	}
	cands = append(cands, "/usr/bin/python3")
	for _, p := range cands {
		if exec.Command(p, "-c", "import ctypes, cpmapi; ctypes.CDLL('libpcp.so.3')").Run() == nil {
			return p
		}
	}
	if e2e.Mandatory() {
		t.Fatal("no python3 that loads libpcp.so.3 (Debian python3-pcp, pcp)")
	}
	t.Skip("no python3 that loads libpcp.so.3 (set CI=true to make this a failure)")
	return ""
}

// writeGolden runs a testdata script with python3-pcp (in testdata, with
// args) and writes what it prints to golden: -update's regeneration of a
// table libpcp answers.
func writeGolden(t *testing.T, golden, script string, args ...string) {
	cmd := exec.Command(pythonWithPCP(t), append([]string{script}, args...)...)
	cmd.Dir = "testdata"
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v", script, err)
	}
	if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

var exprTokens = []string{
	"a", "b.c", "seed.instant", "x_1.y", "type", "units", "semantics", "1", "42", "4294967296", "1.5", ".5", "7.",
	"+", "-", "*", "/", "(", ")", "<", "<=", "==", ">=", ">", "!=", "&&", "||", "!", "?", ":", ",", "=",
	"avg(", "count(", "delta(", "rate(", "instant(", "sum(", "max(", "min(", "defined(", "rescale(", "mkconst(",
	"matchinst(", "scalar(", "anon(", "avg", "delta ", "[inst 1]", "[a\\]b]", "[open", "\"Kbyte\"", "\"bad",
	"/ab+/", "/x", "type=", "type=U64", "semantics=counter", "units=\"sec\"", "PM_TYPE_U32", "@", "&", "|",
	"#", "$", " ", "  ", "\t", "1e3", "a..b", "1a",
}

// randomExpr makes expression text: token soup, or a valid expression with
// one token changed.
func randomExpr(r *rand.Rand) string {
	var b strings.Builder
	if r.IntN(2) == 0 {
		n := 1 + r.IntN(8)
		for i := 0; i < n; i++ {
			b.WriteString(exprTokens[r.IntN(len(exprTokens))])
			if r.IntN(3) == 0 {
				b.WriteByte(' ')
			}
		}
		return b.String()
	}
	valid := []string{
		"a + b * c", "delta(a) / delta(b)", "a > 1 ? a : -a", "avg(a) - min(a)", "!a > b || c < d",
		"rescale(a, \"Kbyte\")", "mkconst(1, type=64, units=\"sec\")", "a[x y] + 1", "matchinst(!/^a/, b)",
		"(a + b)[z]", "scalar(a) == 2 && defined(q)", "count(a) * 1.5", "rate(a) + instant(b)", "anon(PM_TYPE_U32)",
	}
	s := valid[r.IntN(len(valid))]
	toks := strings.Split(s, " ")
	toks[r.IntN(len(toks))] = exprTokens[r.IntN(len(exprTokens))]
	return strings.Join(toks, " ")
}

// TestAgainstLibpcp registers thousands of generated expressions with the
// installed libpcp (in one process, as our Session models it) and compares
// the accepted/rejected verdict, the error position and pmDerivedErrStr
// with Parse.
func TestAgainstLibpcp(t *testing.T) {
	py := pythonWithPCP(t)
	r := rand.New(rand.NewPCG(1, 2))
	var exprs []string
	for len(exprs) < 4000 {
		// libpcp 6.0 crashes (double free) on anon() of anything but a
		// PM_TYPE_ name
		if e := randomExpr(r); !strings.Contains(e, "anon(") {
			exprs = append(exprs, e)
		}
	}
	var in bytes.Buffer
	for _, e := range exprs {
		j, _ := json.Marshal(e)
		in.Write(j)
		in.WriteByte('\n')
	}
	cmd := exec.Command(py, "../testdata/derived/pmregister.py")
	cmd.Env = append(cmd.Environ(), "PCP_DERIVED_CONFIG=")
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pmregister.py: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	var s Session
	bad := 0
	for i := 0; sc.Scan(); i++ {
		var want struct {
			Pos *int
			Msg string
		}
		if err := json.Unmarshal(sc.Bytes(), &want); err != nil {
			t.Fatal(err)
		}
		_, err := s.Parse(exprs[i])
		var se *SyntaxError
		switch {
		case want.Pos == nil && err == nil:
			continue
		case want.Pos == nil:
			t.Errorf("%q: libpcp accepts it, we say %v", exprs[i], err)
		case !errors.As(err, &se):
			t.Errorf("%q: libpcp says pos %d %q, we accept it", exprs[i], *want.Pos, want.Msg)
		case se.Pos != *want.Pos || se.Msg != want.Msg:
			t.Errorf("%q: libpcp says pos %d %q, we say pos %d %q", exprs[i], *want.Pos, want.Msg, se.Pos, se.Msg)
		default:
			continue
		}
		if bad++; bad > 30 {
			t.Fatal("too many differences")
		}
	}
}

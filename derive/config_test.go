package derive

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCorpusSyntaxConfig loads derived_syntax.conf as the corpus did
// (PCP_DERIVED_CONFIG=derived/derived_syntax.conf from the corpus root) and
// compares the reports with pminfo's stderr: pmLoadDerivedConfig's messages,
// then pminfo's "Unknown metric name" for the definitions that were dropped.
func TestCorpusSyntaxConfig(t *testing.T) {
	t.Chdir("../testdata/pcp-corpus")
	defs, errs := LoadConfig("derived/derived_syntax.conf")
	var got strings.Builder
	for _, err := range errs {
		ce, ok := err.(*ConfigError)
		if !ok {
			t.Fatalf("unexpected error %v", err)
		}
		got.WriteString(ce.Report())
	}
	defined := map[string]bool{}
	for _, d := range defs {
		defined[d.Name] = true
	}
	for _, name := range []string{"derived.cfg.good1", "derived.cfg.bad1", "derived.cfg.good2", "derived.cfg.bad2"} {
		if !defined[name] {
			got.WriteString("Error: " + name + ": Unknown metric name\n")
		}
	}
	want, err := os.ReadFile("derived/expected/syntaxconf.seedtables.pminfo-f.txt.stderr")
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != string(want) {
		t.Errorf("got:\n%s\nPCP:\n%s", got.String(), want)
	}
	if len(defs) != 2 || defs[0].Name != "derived.cfg.good1" || defs[0].Line != 2 || defs[1].Name != "derived.cfg.good2" || defs[1].Line != 5 {
		t.Errorf("definitions %+v", defs)
	}
}

// TestConfigRules checks pmLoadDerivedConfig's line rules (pcp-spec.md 4.5).
func TestConfigRules(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := write("a.conf", "# comment\n"+
		"\n"+
		"a.one = x + \\\ny\n"+
		"a.two=p==q\n"+
		" # not a comment\n"+
		"a.one(oneline) = one line help\n"+
		"a.one(helptext) = 'multi\n"+
		"line \\' text'\n"+
		"a.two(oneline) = \"x\" trailing\n"+
		"a.last = z")
	defs, errs := LoadConfig(p)
	if len(defs) != 2 {
		t.Fatalf("defs %+v errs %v", defs, errs)
	}
	if defs[0].Name != "a.one" || defs[0].Expr.String() != "(x + y)" || defs[0].OneLine != "one line help" || defs[0].Help != "multi\nline ' text" {
		t.Errorf("a.one: %+v %s", defs[0], defs[0].Expr)
	}
	if defs[1].Name != "a.two" || defs[1].Expr.String() != "(p == q)" || defs[1].OneLine != "x" {
		t.Errorf("a.two: %+v", defs[1])
	}
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	want := []string{
		"[" + p + ":6] Error: pmLoadDerivedConfig: missing ``='' after derived metric name",
		// libpcp counts a quoted value that ends on the next line as one
		// line (lineno += xtralines-1), so this line 10 is reported as 9
		"[" + p + ":9] Warning: pmLoadDerivedConfig: extra text (trailing) after attribute value will be ignored",
	}
	if strings.Join(msgs, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(msgs, "\n"), strings.Join(want, "\n"))
	}
	// directories are walked, colon-separated paths, duplicates rejected
	sub := filepath.Join(dir, "d")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	write("d/b.conf", "b.x = 1\na.one = 2\n")
	defs, errs = LoadConfig(p + ":" + sub)
	if len(defs) != 3 || defs[2].Name != "b.x" {
		t.Errorf("defs %+v", defs)
	}
	if len(errs) != 3 || !strings.Contains(errs[2].(*ConfigError).Report(), "Duplicate global derived metric name") {
		t.Errorf("errs %v", errs)
	}
	if _, errs := LoadConfig(filepath.Join(dir, "missing")); len(errs) != 1 {
		t.Errorf("missing file: %v", errs)
	}
}

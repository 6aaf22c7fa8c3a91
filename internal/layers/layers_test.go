package layers

import (
	"bufio"
	"errors"
	"fmt"
	"go/build"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// table is docs/layers.md read: each package pattern's row, and the
// exceptions.
type table struct {
	rows       []row
	exceptions []exception
}

type row struct {
	layer    int
	patterns []string
	never    []string
}

type exception struct {
	pkg, imports string
	used         bool
}

// match reports whether the module-relative package p matches pattern:
// "*" is every package, "x/..." x and the packages below it.
func match(pattern, p string) bool {
	if pattern == "*" {
		return true
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return p == base || strings.HasPrefix(p, base+"/")
	}
	return p == pattern
}

// cells splits a markdown table line into its cells, "" when it is no row.
func cells(line string) []string {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "|") || !strings.HasSuffix(line, "|") {
		return nil
	}
	var cs []string
	for _, c := range strings.Split(line[1:len(line)-1], "|") {
		cs = append(cs, strings.TrimSpace(c))
	}
	return cs
}

// codes returns the backquoted words of a cell.
func codes(cell string) []string {
	var out []string
	for i, part := range strings.Split(cell, "`") {
		if i%2 == 1 {
			out = append(out, part)
		}
	}
	return out
}

// parseTable reads the layer table and the exceptions table of a
// docs/layers.md.
func parseTable(text string) (table, error) {
	var t table
	section := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			section = strings.TrimSpace(strings.TrimLeft(line, "#"))
			continue
		}
		cs := cells(line)
		if cs == nil || strings.HasPrefix(cs[0], "---") || cs[0] == "layer" || cs[0] == "package" {
			continue
		}
		switch section {
		case "Layers":
			if len(cs) != 4 {
				return t, fmt.Errorf("line %d: want 4 cells (layer, packages, what, never imports), got %d", n, len(cs))
			}
			l, err := strconv.Atoi(cs[0])
			if err != nil {
				return t, fmt.Errorf("line %d: layer %q is not a number", n, cs[0])
			}
			r := row{layer: l, patterns: codes(cs[1]), never: codes(cs[3])}
			if len(r.patterns) == 0 {
				return t, fmt.Errorf("line %d: no `package` in the packages cell", n)
			}
			t.rows = append(t.rows, r)
		case "Exceptions":
			if len(cs) != 3 || len(codes(cs[0])) != 1 || len(codes(cs[1])) != 1 || cs[2] == "" {
				return t, fmt.Errorf("line %d: want `package` | `import` | why", n)
			}
			t.exceptions = append(t.exceptions, exception{pkg: codes(cs[0])[0], imports: codes(cs[1])[0]})
		}
	}
	if len(t.rows) == 0 {
		return t, errors.New("no layer table under a \"# Layers\" heading")
	}
	return t, sc.Err()
}

// rowOf returns the row of package p: the one with its longest matching
// pattern (an exact name before a /...), nil if none.
func (t *table) rowOf(p string) *row {
	var best *row
	bestLen := -1
	for i := range t.rows {
		for _, pat := range t.rows[i].patterns {
			l := len(strings.TrimSuffix(pat, "/..."))
			if !strings.HasSuffix(pat, "/...") {
				l++ // x beats x/...
			}
			if match(pat, p) && l > bestLen {
				best, bestLen = &t.rows[i], l
			}
		}
	}
	return best
}

// check returns one line per import of imports (package -> its imports
// of this module, module-relative) that the table forbids, and per
// package without a layer; it marks the exceptions used.
func (t *table) check(imports map[string][]string) []string {
	var bad []string
	pkgs := make([]string, 0, len(imports))
	for p := range imports {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		r := t.rowOf(p)
		if r == nil {
			bad = append(bad, fmt.Sprintf("%s: no layer in docs/layers.md (add it to a row)", p))
			continue
		}
		for _, imp := range imports[p] {
			why := ""
			if ir := t.rowOf(imp); ir == nil {
				why = "has no layer"
			} else if ir.layer > r.layer {
				why = fmt.Sprintf("is in layer %d, above %s's %d", ir.layer, p, r.layer)
			}
			for _, nv := range r.never {
				if why == "" && match(nv, imp) {
					why = fmt.Sprintf("matches %q, which %s never imports", nv, p)
				}
			}
			if why == "" {
				continue
			}
			excused := false
			for i := range t.exceptions {
				if e := &t.exceptions[i]; e.pkg == p && e.imports == imp {
					e.used, excused = true, true
				}
			}
			if !excused {
				bad = append(bad, fmt.Sprintf("%s imports %s, which %s", p, imp, why))
			}
		}
	}
	return bad
}

// modulePath returns the module path go.mod under root names.
func modulePath(root string) (string, error) {
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(mod), "\n") {
		if p, ok := strings.CutPrefix(strings.TrimSpace(l), "module "); ok {
			return strings.TrimSpace(p), nil
		}
	}
	return "", errors.New("go.mod names no module")
}

// moduleImports returns, for each package of the module rooted at root,
// its non-test imports of the module (module-relative; the root package
// is ".").
func moduleImports(root string) (map[string][]string, error) {
	modPath, err := modulePath(root)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	err = filepath.WalkDir(root, func(dir string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		name := d.Name()
		if dir != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		if dir != root {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
		}
		bp, err := build.ImportDir(dir, 0)
		var noGo *build.NoGoError
		if errors.As(err, &noGo) || (err == nil && len(bp.GoFiles) == 0) {
			return nil // no package, or tests only
		}
		if err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			return err
		}
		p := filepath.ToSlash(rel)
		out[p] = nil
		for _, imp := range bp.Imports {
			if imp == modPath {
				out[p] = append(out[p], ".")
			} else if r, ok := strings.CutPrefix(imp, modPath+"/"); ok {
				out[p] = append(out[p], path.Clean(r))
			}
		}
		return nil
	})
	return out, err
}

// TestImportsFollowLayers checks every package's imports against
// docs/layers.md.
func TestImportsFollowLayers(t *testing.T) {
	doc, err := os.ReadFile("../../docs/layers.md")
	if err != nil {
		t.Fatal(err)
	}
	tab, err := parseTable(string(doc))
	if err != nil {
		t.Fatalf("docs/layers.md: %v", err)
	}
	imports, err := moduleImports("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"semantics", "source", "source/pmcd", "bridge", "cmd/pcp-exporter"} {
		if _, ok := imports[p]; !ok {
			t.Fatalf("package %s not found: the walk of the module is broken", p)
		}
	}
	for _, b := range tab.check(imports) {
		t.Error(b)
	}
	for _, e := range tab.exceptions {
		if !e.used {
			t.Errorf("docs/layers.md: exception %s -> %s is no longer used: remove it", e.pkg, e.imports)
		}
	}
}

// TestCheckFindsWrongImports runs the check over imports made up to break
// each rule of the real table.
func TestCheckFindsWrongImports(t *testing.T) {
	doc, err := os.ReadFile("../../docs/layers.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		imports map[string][]string
		want    string // "" none
	}{
		{"allowed", map[string][]string{"source/mmv": {"source", "semantics", "source/mmv/internal/layout"}, "bridge": {"mapping", "source"}}, ""},
		{"semantics imports nothing of ours", map[string][]string{"semantics": {"source"}}, "semantics imports source, which is in layer 1, above semantics's 0"},
		{"a helper imports nothing of ours", map[string][]string{"internal/sasl": {"semantics"}}, `internal/sasl imports semantics, which matches "*", which internal/sasl never imports`},
		{"a source never imports mapping", map[string][]string{"source/pmcd": {"mapping"}}, "source/pmcd imports mapping, which is in layer 3, above source/pmcd's 2"},
		{"a source never imports derive", map[string][]string{"source/archive": {"derive"}}, "source/archive imports derive, which is in layer 3, above source/archive's 2"},
		{"a source never imports an output", map[string][]string{"source/mmv": {"bridge"}}, "source/mmv imports bridge, which is in layer 4, above source/mmv's 2"},
		{"an output never imports a format", map[string][]string{"bridge": {"source/mmv"}}, `bridge imports source/mmv, which matches "source/mmv/...", which bridge never imports`},
		{"nor pmcd's internals", map[string][]string{"bridge/httpd": {"source/pmcd/wire"}}, `bridge/httpd imports source/pmcd/wire, which matches "source/pmcd/..."`},
		{"an exception", map[string][]string{"bridge/backfill": {"source/archive"}}, ""},
		{"the exception is for one package only", map[string][]string{"bridge": {"source/archive"}}, `bridge imports source/archive, which matches "source/archive/..."`},
		{"a package without a layer", map[string][]string{"newthing": nil}, "newthing: no layer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab, err := parseTable(string(doc))
			if err != nil {
				t.Fatal(err)
			}
			bad := tab.check(tc.imports)
			switch {
			case tc.want == "" && len(bad) > 0:
				t.Errorf("want no error, got %q", bad)
			case tc.want != "" && (len(bad) != 1 || !strings.HasPrefix(bad[0], tc.want)):
				t.Errorf("want one error starting %q, got %q", tc.want, bad)
			}
		})
	}
}

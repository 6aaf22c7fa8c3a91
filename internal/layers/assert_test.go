package layers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// modulePackage is the parsed non-test files of one package.
type modulePackage struct {
	files []*ast.File
	// interfaces are the package's type names declared as interfaces
	interfaces map[string]bool
}

// parseModule parses the non-test files of each package of imports
// (module-relative) under root.
func parseModule(t *testing.T, fset *token.FileSet, root string, imports map[string][]string) map[string]*modulePackage {
	t.Helper()
	pkgs := map[string]*modulePackage{}
	for p := range imports {
		dir := filepath.Join(root, filepath.FromSlash(p))
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		mp := &modulePackage{interfaces: map[string]bool{}}
		for _, e := range entries {
			n := e.Name()
			if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			mp.files = append(mp.files, f)
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.TYPE {
					continue
				}
				for _, s := range g.Specs {
					ts := s.(*ast.TypeSpec)
					if _, ok := ts.Type.(*ast.InterfaceType); ok {
						mp.interfaces[ts.Name.Name] = true
					}
				}
			}
		}
		pkgs[p] = mp
	}
	return pkgs
}

// foreignConcreteAssertions returns, for the files of package p, each type
// assertion or type switch case on a concrete type of another package of
// the module ("file:line: x.(*pkg.T)").
func foreignConcreteAssertions(fset *token.FileSet, modPath, p string, pkgs map[string]*modulePackage) []string {
	var bad []string
	for _, f := range pkgs[p].files {
		imported := map[string]string{} // local name -> module-relative path
		for _, im := range f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			rel, ok := strings.CutPrefix(path, modPath+"/")
			if !ok {
				continue
			}
			name := rel[strings.LastIndex(rel, "/")+1:]
			if im.Name != nil {
				name = im.Name.Name
			}
			imported[name] = rel
		}
		check := func(typ ast.Expr) {
			if st, ok := typ.(*ast.StarExpr); ok {
				typ = st.X
			}
			sel, ok := typ.(*ast.SelectorExpr)
			if !ok {
				return
			}
			id, ok := sel.X.(*ast.Ident)
			if !ok {
				return
			}
			other, ok := imported[id.Name]
			if !ok || other == p || pkgs[other] == nil || pkgs[other].interfaces[sel.Sel.Name] {
				return
			}
			if strings.HasSuffix(sel.Sel.Name, "Error") {
				return // an error's type, as errors.As matches it
			}
			pos := fset.Position(typ.Pos())
			bad = append(bad, pos.Filename+":"+strconv.Itoa(pos.Line)+": asserts "+other+"."+sel.Sel.Name+", a concrete type of another package: ask for a capability (an interface of source) instead")
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.TypeAssertExpr:
				if n.Type != nil {
					check(n.Type)
				}
			case *ast.TypeSwitchStmt:
				for _, c := range n.Body.List {
					for _, e := range c.(*ast.CaseClause).List {
						check(e)
					}
				}
			}
			return true
		})
	}
	return bad
}

// TestNoForeignConcreteAssertions: no package asserts a concrete type of
// another package of the module (what a source can do is asked through
// source's capabilities; a package may assert its own types, and any
// package an error's type, named ...Error).
func TestNoForeignConcreteAssertions(t *testing.T) {
	imports, err := moduleImports("../..")
	if err != nil {
		t.Fatal(err)
	}
	modPath, err := modulePath("../..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	pkgs := parseModule(t, fset, "../..", imports)
	var names []string
	for p := range pkgs {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		for _, b := range foreignConcreteAssertions(fset, modPath, p, pkgs) {
			t.Error(b)
		}
	}
}

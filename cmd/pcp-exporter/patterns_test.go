package main

import (
	"fmt"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pcp-exporter/pcp-exporter/bridge"
	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/source/pmcd"
)

// TestPatternsOneRule: a metric pattern selects the same metrics in the
// mapping file's include and exclude, --pmcd.metrics and ?names=: a bare
// name the metrics `pminfo -a ARCHIVE NAME` lists (the metric and its
// subtree), a glob those fnmatch matches over the whole name (Python's
// fnmatchcase, which agrees with fnmatch(3) on globs without "\").
func TestPatternsOneRule(t *testing.T) {
	t.Parallel()
	bins := e2e.Require(t, "pminfo", "python3")
	arch := filepath.Join(corpus, "archives", "live", "live")
	names := strings.Fields(runOut(t, bins[0], "-a", arch))
	if len(names) < 100 {
		t.Fatalf("pminfo -a %s: %d names", arch, len(names))
	}
	fnmatch := func(glob string) []string {
		py := "import fnmatch, sys\nfor n in sys.argv[2:]:\n    if fnmatch.fnmatchcase(n, sys.argv[1]): print(n)\n"
		return strings.Fields(runOut(t, bins[1], append([]string{"-c", py, glob}, names...)...))
	}
	for _, c := range []struct {
		pattern string
		glob    bool
	}{
		{"mem.util", false},
		{"kernel.all.cpu", false},
		{"kernel.all.load", false},
		{"disk", false},
		{"disk.d*", true},
		{"kernel.all.cpu.[!i]*", true},
		{"*.in.*", true},
	} {
		var want []string
		if c.glob {
			want = fnmatch(c.pattern)
		} else {
			want = strings.Fields(runOut(t, bins[0], "-a", arch, c.pattern))
		}
		if len(want) == 0 {
			t.Fatalf("%s selects nothing in %s", c.pattern, arch)
		}
		in, err := mapping.ParseConfig([]byte(fmt.Sprintf("include: [%q]\n", c.pattern)))
		if err != nil {
			t.Fatal(err)
		}
		ex, err := mapping.ParseConfig([]byte(fmt.Sprintf("exclude: [%q]\n", c.pattern)))
		if err != nil {
			t.Fatal(err)
		}
		mIn, _ := mapping.New(in, mapping.Options{})
		mEx, _ := mapping.New(ex, mapping.Options{})
		pIn, err := pmcd.ParseSelection([]string{c.pattern})
		if err != nil {
			t.Fatal(err)
		}
		pEx, _ := pmcd.ParseSelection([]string{"-" + c.pattern})
		q := bridge.SelectionFrom(url.Values{"names": {c.pattern}})
		for _, n := range names {
			w := slices.Contains(want, n)
			for place, got := range map[string]bool{
				"mapping include":  mIn.Selected(n),
				"mapping exclude":  !mEx.Selected(n),
				"--pmcd.metrics":   pIn.Selected(n),
				"--pmcd.metrics=-": !pEx.Selected(n),
				"?names=":          q.Family(&mapping.Family{PCPName: n}),
			} {
				if got != w {
					t.Errorf("%s %q: %s selected %v, want %v", place, c.pattern, n, got, w)
				}
			}
		}
	}
}

// runOut runs a command and returns its standard output.
func runOut(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, err := exec.Command(bin, args...).Output()
	if err != nil {
		t.Fatalf("%s %v: %v", bin, args[:min(len(args), 4)], err)
	}
	return string(out)
}

package mapping

import (
	"bufio"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// pminfoMetrics reads testdata/pminfo-d.txt (pminfo -d of the proc, hotproc
// and pmcd.client agents on the test VM): names, types and semantics.
func pminfoMetrics(t *testing.T) []source.Metric {
	f, err := os.Open("testdata/pminfo-d.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ms []source.Metric
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
		case !strings.HasPrefix(l, " "):
			ms = append(ms, source.Metric{Name: l, Desc: semantics.Desc{Type: semantics.TypeU32, InDom: semantics.InDomNull}})
		case strings.Contains(l, "Data Type:"):
			if strings.Contains(l, "Data Type: string") {
				ms[len(ms)-1].Desc.Type = semantics.TypeString
			}
			if !strings.Contains(l, "PM_INDOM_NULL") {
				ms[len(ms)-1].Desc.InDom = semantics.NewInDom(3, 9)
			}
		case strings.Contains(l, "Semantics: counter"):
			ms[len(ms)-1].Desc.Sem = semantics.SemCounter
		case strings.Contains(l, "Semantics: discrete"):
			ms[len(ms)-1].Desc.Sem = semantics.SemDiscrete
		case strings.Contains(l, "Semantics: instant"):
			ms[len(ms)-1].Desc.Sem = semantics.SemInstant
		}
	}
	if len(ms) < 300 {
		t.Fatalf("%d metrics in pminfo-d.txt", len(ms))
	}
	return ms
}

// TestSecretsExist: every name in Secrets is a STRING metric pminfo knows
// (no misspelt name that would let the real one through).
func TestSecretsExist(t *testing.T) {
	byName := map[string]source.Metric{}
	for _, m := range pminfoMetrics(t) {
		byName[m.Name] = m
	}
	for _, s := range Secrets {
		if m, ok := byName[s]; !ok || m.Desc.Type != semantics.TypeString {
			t.Errorf("%s: not a string metric of pminfo -d (%+v)", s, m)
		}
	}
}

// TestLeanRules maps the proc, hotproc and pmcd.client metrics pminfo
// lists under each way of selecting them: a secret is exported only when
// named whole; per-process subtrees only when turned on or selected;
// non-DISCRETE strings only with instant-strings or named whole.
func TestLeanRules(t *testing.T) {
	ms := pminfoMetrics(t)
	glob, _ := ParsePattern("proc.*")
	re, _ := ParsePattern(`/^proc\.psinfo\.environ$/`)
	lit, _ := ParsePattern("proc.psinfo.environ")
	procSel := func(n string) bool { return strings.HasPrefix(n, "proc.") }
	for _, c := range []struct {
		name string
		cfg  *Config
		opts Options
		// exported names among the interesting ones
		want []string
	}{
		{name: "default", want: []string{"kernel.uname.release"}},
		// proc.psinfo.cmd is DISCRETE (pminfo -d): an info metric per process
		{name: "with proc", opts: Options{With: []string{"proc"}}, want: []string{"kernel.uname.release", "proc.nprocs", "proc.psinfo.cmd", "proc.psinfo.utime"}},
		{name: "with proc and instant strings", opts: Options{With: []string{"proc", InstantStrings}}, want: []string{"kernel.uname.release", "pmcd.services", "proc.nprocs", "proc.psinfo.cmd", "proc.psinfo.utime"}},
		{name: "selection proc", opts: Options{Selected: procSel}, want: []string{"kernel.uname.release", "proc.nprocs", "proc.psinfo.cmd", "proc.psinfo.utime"}},
		{name: "selection proc, environ named", opts: Options{Selected: procSel, Named: []string{"proc.psinfo.environ"}}, want: []string{"kernel.uname.release", "proc.nprocs", "proc.psinfo.cmd", "proc.psinfo.environ", "proc.psinfo.utime"}},
		{name: "include glob", cfg: &Config{Include: []Pattern{glob}}, want: []string{"proc.nprocs", "proc.psinfo.cmd", "proc.psinfo.utime"}},
		{name: "include regexp", cfg: &Config{Include: []Pattern{re}}},
		{name: "include literal", cfg: &Config{Include: []Pattern{lit}}, want: []string{"proc.psinfo.environ"}},
		{name: "every opt-in", opts: Options{With: LeanNames()}, want: []string{"kernel.uname.release", "pmcd.services", "proc.nprocs", "proc.psinfo.cmd", "proc.psinfo.utime"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := New(c.cfg, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			fams, skipped := m.MapAll(ms, nil)
			exported := map[string]bool{}
			for _, f := range fams {
				exported[f.PCPName] = true
				if IsSecret(f.PCPName) && !contains(c.opts.Named, f.PCPName) && !(c.cfg != nil && c.cfg.Include[0].Text == f.PCPName) {
					t.Errorf("secret %s exported", f.PCPName)
				}
			}
			var got []string
			for _, n := range []string{"kernel.uname.release", "pmcd.services", "proc.nprocs", "proc.psinfo.cmd", "proc.psinfo.environ", "proc.psinfo.psargs", "proc.psinfo.utime", "hotproc.psinfo.environ", "pmcd.client.whoami"} {
				if exported[n] {
					got = append(got, n)
				}
			}
			if strings.Join(got, " ") != strings.Join(c.want, " ") {
				t.Errorf("exported %v, want %v", got, c.want)
			}
			for _, s := range skipped {
				if IsSecret(s.PCPName) && s.Reason != SkipSecret && s.Reason != SkipExcluded {
					t.Errorf("secret %s skipped as %s", s.PCPName, s.Reason)
				}
			}
		})
	}
}

// TestLeanDefaultSkipsEveryProcString: with no selection, no STRING
// metric of the proc and hotproc agents is exported, and every one that
// is not DISCRETE stays out when proc and hotproc are turned on.
func TestLeanDefaultSkipsEveryProcString(t *testing.T) {
	ms := pminfoMetrics(t)
	def, _ := New(nil, Options{})
	on, _ := New(nil, Options{With: []string{"proc", "hotproc", "pmcd.client"}})
	var onStrings []string
	for i := range ms {
		md := &ms[i]
		if md.Desc.Type != semantics.TypeString || md.Name == "kernel.uname.release" || strings.HasPrefix(md.Name, "kernel.uname") {
			continue
		}
		if _, why := def.Map(md); why == "" {
			t.Errorf("default: %s exported", md.Name)
		}
		if _, why := on.Map(md); why == "" {
			onStrings = append(onStrings, md.Name)
		}
	}
	sort.Strings(onStrings)
	// what pminfo -d calls discrete among them: the only strings proc
	// gives once turned on
	for _, n := range onStrings {
		for i := range ms {
			if ms[i].Name == n && ms[i].Desc.Sem != semantics.SemDiscrete {
				t.Errorf("%s (not discrete) exported with proc turned on", n)
			}
		}
	}
}

func TestWithUnknown(t *testing.T) {
	if _, err := New(nil, Options{With: []string{"kernel"}}); err == nil || !strings.Contains(err.Error(), "mem.slabinfo") {
		t.Errorf("with kernel: %v", err)
	}
	if _, err := ParseConfig([]byte("with: [proc.psinfo]\n")); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("config with proc.psinfo: %v", err)
	}
	if _, err := ParseConfig([]byte("with: [proc, instant-strings]\n")); err != nil {
		t.Error(err)
	}
}

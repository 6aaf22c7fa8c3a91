package mapping

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// What a run exports unless told otherwise, decided here for every output
// (pmcd, MMV files, archives, backfill, OTLP, the mapping command): every
// one maps through Mapper.Map.
//
// Secrets. The metrics in Secrets carry what a process keeps to itself or
// what can hold a credential: its environment (tokens, passwords, cloud
// keys), its command line (mysql -pPASSWORD), its working directory and
// executable path, its memory map (every file it maps, up to tens of KB in
// one label) and a pmcd client's self-description (its command line). The
// exporter serves them to whoever can reach it, and pmcd reads them as root.
// Neither a subtree, a glob, a regular expression nor a lean-default opt-in
// selects them: only a name written out whole in --pmcd.metrics (or
// Options.Named) or as a literal include pattern of the mapping file.
//
// Lean default. With no selection (no include pattern in --pmcd.metrics or
// the mapping file), the families of LeanDefault are left out: those whose
// series are keyed by a process, client or connection (new series with
// every process: churn), those whose series count grows with the hardware
// and that node_exporter leaves out by default too, and STRING metrics
// that are not DISCRETE (their value is a label, so a changing value is a
// new series at every change). Each is one --mapping.with away (the mapping
// file's with:); a selection that includes them turns the subtrees on, and
// a name written out whole always exports it.

// Secrets are the PCP metrics never selected but by their exact name.
var Secrets = []string{
	"proc.psinfo.environ", "proc.psinfo.psargs", "proc.psinfo.cwd", "proc.psinfo.exe", "proc.memory.maps",
	"hotproc.psinfo.environ", "hotproc.psinfo.psargs", "hotproc.psinfo.cwd", "hotproc.psinfo.exe", "hotproc.memory.maps",
	"pmcd.client.whoami",
}

// InstantStrings is the LeanDefault entry of the STRING metrics that are
// not DISCRETE.
const InstantStrings = "instant-strings"

// LeftOut is an entry of the lean default: a PCP subtree (or
// InstantStrings) and why it is left out.
type LeftOut struct {
	Name string
	Why  string
}

// LeanDefault is what a run without selection leaves out. The counts are
// of this project's 2-CPU test VM (docs/performance.md: Lean default).
var LeanDefault = []LeftOut{
	{"proc", "per process: about 130 series per PID, new ones with every process (kernel.all.nprocs, running and blocked count them)"},
	{"hotproc", "per process, as proc"},
	{"acct", "per exited process (process accounting)"},
	{"pmcd.client", "per pmcd client connection"},
	{"pmcd.pmlogger", "per pmlogger process (instances are PIDs)"},
	{"pmcd.pmie", "per pmie process (instances are PIDs)"},
	{"mem.slabinfo", "8 series per slab cache: 1,856 on a 2-CPU VM (node_exporter's slabinfo collector is off by default too)"},
	{"mem.zoneinfo", "per memory zone and NUMA node: 131 series (node_exporter: zoneinfo off by default)"},
	{"mem.buddyinfo", "per zone and page order: 66 series (node_exporter: buddyinfo off by default)"},
	{"mem.numa", "per NUMA node, repeats mem.util on one node: 37 series (node_exporter: meminfo_numa off by default)"},
	{"kernel.percpu.interrupts", "CPUs times interrupt lines: 64 series on 2 CPUs, thousands on large hosts (node_exporter: interrupts off by default)"},
	{InstantStrings, "STRING metrics that are not DISCRETE: the value is a label, each change a new series (proc.psinfo.sname, pmcd.services)"},
}

// SkipSecret and SkipDefaultOff are the reasons of metrics left out by the
// rules above.
const (
	SkipSecret     SkipReason = "secret"      // in Secrets and not named exactly
	SkipDefaultOff SkipReason = "default_off" // in LeanDefault (--mapping.with)
)

// IsSecret reports whether a PCP metric is in Secrets.
func IsSecret(name string) bool {
	for _, s := range Secrets {
		if name == s {
			return true
		}
	}
	return false
}

// LeanEntries appends the LeanDefault entries that leave a metric out
// (its subtree, InstantStrings), regardless of any selection.
func LeanEntries(md *source.Metric, out []string) []string {
	for _, e := range LeanDefault {
		if e.Name == InstantStrings {
			if md.Desc.Type == semantics.TypeString && md.Desc.Sem != semantics.SemDiscrete {
				out = append(out, e.Name)
			}
			continue
		}
		if md.Name == e.Name || strings.HasPrefix(md.Name, e.Name) && md.Name[len(e.Name)] == '.' {
			out = append(out, e.Name)
		}
	}
	return out
}

// leanRule says whether the secret and lean-default rules leave md out:
// each entry that applies must be turned on (a subtree also by a
// selection that takes the name).
func (m *Mapper) leanRule(md *source.Metric) SkipReason {
	if m.named[md.Name] {
		return ""
	}
	if IsSecret(md.Name) {
		return SkipSecret
	}
	var buf [2]string
	for _, e := range LeanEntries(md, buf[:0]) {
		if !m.with[e] && (e == InstantStrings || !m.selectedBy(md.Name)) {
			return SkipDefaultOff
		}
	}
	return ""
}

// setLean records the options and configuration of the lean rules.
func (m *Mapper) setLean(opts Options) error {
	m.named = map[string]bool{}
	for _, n := range opts.Named {
		m.named[n] = true
	}
	for _, p := range m.cfg.Include {
		if literal(p.Text) {
			m.named[p.Text] = true
		}
	}
	m.with = map[string]bool{}
	for _, w := range append(append([]string(nil), m.cfg.With...), opts.With...) {
		if !leanName(w) {
			return &withError{w}
		}
		m.with[w] = true
	}
	m.selection = opts.Selected
	return nil
}

// selectedBy reports whether a selection includes the name: an include
// pattern of the mapping file, or Options.Selected.
func (m *Mapper) selectedBy(name string) bool {
	return len(m.cfg.Include) > 0 || m.selection != nil && m.selection(name)
}

// literal reports whether a pattern of the mapping file is a whole name:
// no glob characters, no regular expression.
func literal(p string) bool {
	return p != "" && !strings.ContainsAny(p, `*?[\/`)
}

// leanName reports whether w names a LeanDefault entry.
func leanName(w string) bool {
	for _, e := range LeanDefault {
		if e.Name == w {
			return true
		}
	}
	return false
}

// LeanSubtrees returns the PCP subtrees of LeanDefault that are not
// turned on in with: a source that can leave them unread (pmcd) does so
// when no selection takes them.
func LeanSubtrees(with []string) []string {
	var out []string
	for _, e := range LeanDefault {
		if e.Name != InstantStrings && !contains(with, e.Name) {
			out = append(out, e.Name)
		}
	}
	return out
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// LeanNames returns the names of the LeanDefault entries.
func LeanNames() []string {
	out := make([]string, len(LeanDefault))
	for i, e := range LeanDefault {
		out[i] = e.Name
	}
	return out
}

type withError struct{ name string }

func (e *withError) Error() string {
	return "with: " + quote(e.name) + " is not left out by default (want one of " + strings.Join(LeanNames(), ", ") + ")"
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }

// DefaultOffDescription is a LeanDefault entry (or the secrets) in a
// Description: how many of the source's metrics it leaves out, and the
// flag that turns it on.
type DefaultOffDescription struct {
	Name    string `json:"name"`
	Metrics int    `json:"metrics"`
	Flag    string `json:"flag"`
	Why     string `json:"why"`
}

// describeDefaultOff counts, per LeanDefault entry and for the secrets,
// the metrics that the rules left out (why: the skip reasons by name).
func describeDefaultOff(all []source.Metric, why map[string]SkipReason) []DefaultOffDescription {
	n := map[string]int{}
	secrets := 0
	seen := map[string]bool{}
	var buf [2]string
	for i := range all {
		md := &all[i]
		if seen[md.Name] {
			continue
		}
		seen[md.Name] = true
		switch why[md.Name] {
		case SkipSecret:
			secrets++
		case SkipDefaultOff:
			for _, e := range LeanEntries(md, buf[:0]) {
				n[e]++
			}
		}
	}
	out := make([]DefaultOffDescription, 0, len(LeanDefault)+1)
	for _, e := range LeanDefault {
		out = append(out, DefaultOffDescription{Name: e.Name, Metrics: n[e.Name], Flag: "--mapping.with=" + e.Name, Why: e.Why})
	}
	return append(out, DefaultOffDescription{Name: "secrets", Metrics: secrets, Flag: "--pmcd.metrics=NAME (each written whole)",
		Why: strings.Join(Secrets, ", ") + ": can carry credentials, command lines and paths"})
}

// writeDefaultOff prints the DefaultOff list after the table.
func (d *Description) writeDefaultOff(w io.Writer) error {
	if len(d.DefaultOff) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nLeft out by default (metrics of this source; README: What a default run leaves out):\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, e := range d.DefaultOff {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", e.Name, e.Metrics, e.Flag, e.Why)
	}
	return tw.Flush()
}

// UnreadSubtrees returns the PCP subtrees whose every metric is left
// out of what this mapper exports (the lean default's, less those turned
// on), so that a source selecting everything need not read them (a
// /probe module without metrics). Nil when an include pattern or a
// selection decides instead.
func (m *Mapper) UnreadSubtrees() []string {
	if len(m.cfg.Include) > 0 || m.selection != nil {
		return nil
	}
	var with []string
	for w := range m.with {
		with = append(with, w)
	}
	return LeanSubtrees(with)
}

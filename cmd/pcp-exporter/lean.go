package main

import (
	"strings"

	"github.com/alecthomas/kingpin/v2"

	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/source/pmcd"
)

// leanFlags are what the secret and lean-default rules of the mapping
// (mapping/lean.go) take from the command line: --mapping.with and the
// metric selection (--pmcd.metrics, or the metric arguments).
type leanFlags struct {
	with []string
	// metrics are the selection's patterns (pmcd.ParseSelection's form)
	metrics []string
}

// withFlag adds --mapping.with, whose help lists what the lean default
// leaves out.
func withFlag(cmd *kingpin.CmdClause, l *leanFlags) {
	var b strings.Builder
	b.WriteString("Turn on what is left out by default (repeatable; the mapping file's with:): ")
	for i, e := range mapping.LeanDefault {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(e.Name + " (" + e.Why + ")")
	}
	b.WriteString(". A --pmcd.metrics (or mapping file include) selection that takes a subtree above turns it on too. Never exported but when named whole, one by one, in --pmcd.metrics or the mapping file's include (they can carry credentials): " + strings.Join(mapping.Secrets, ", ") + ".")
	cmd.Flag("mapping.with", b.String()).PlaceHolder("NAME").EnumsVar(&l.with, mapping.LeanNames()...)
}

// options returns the mapper options of the rules: names written out whole
// in the selection, --mapping.with, and what the selection's include
// patterns take.
func (l *leanFlags) options() mapping.Options {
	if l == nil {
		return mapping.Options{}
	}
	o := mapping.Options{With: l.with}
	sel, err := pmcd.ParseSelection(l.metrics)
	if err != nil || len(sel.Include) == 0 {
		return o // a bad selection is reported by the source that uses it
	}
	for _, p := range sel.Include {
		if !strings.ContainsAny(p, "*?[") {
			o.Named = append(o.Named, p)
		}
	}
	o.Selected = sel.Selected
	return o
}

// pmcdExcludes returns the subtrees pmcd need not even be asked for: the
// lean default's, when the selection has no include pattern (else the
// selection decides), less those turned on, and less proc when the process
// groups read it. Their metadata is most of pmcd's (proc's instances and
// labels: a read of all of it took minutes on the busy test VM).
func (l *leanFlags) pmcdExcludes(groups bool) []string {
	sel, err := pmcd.ParseSelection(l.metrics)
	if err != nil || len(sel.Include) > 0 {
		return nil
	}
	var out []string
	for _, t := range mapping.LeanSubtrees(l.with) {
		if groups && t == "proc" {
			continue
		}
		out = append(out, "-"+t)
	}
	return out
}

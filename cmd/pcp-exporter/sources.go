package main

import (
	"log/slog"

	"github.com/alecthomas/kingpin/v2"

	"github.com/pcp-exporter/pcp-exporter/bridge"
)

// sourceKind is one kind of PCP source serve reads: the flags that name
// it, and its opener.
type sourceKind struct {
	kind string
	// flags declares the kind's flags of serve into f.
	flags func(cmd *kingpin.CmdClause, f *serveFlags)
	// open opens the sources of this kind that f names, into o.
	open func(f *serveFlags, o *opened, logger *slog.Logger) error
}

// sourceKinds are the kinds of source serve reads, in the order they are
// opened: pmcd first (with no source flag at all, the local pmcd is
// served when it answers), then archives (followed, replayed, or the
// demo), then the MMV directory, which goes when nothing else is named
// (or when it is named, or next to the local pmcd found so).
var sourceKinds = []sourceKind{
	{kind: "pmcd", flags: pmcdKindFlags, open: openPMCDKind},
	{kind: "archive", flags: archiveKindFlags, open: openArchiveKind},
	{kind: "mmv", flags: mmvKindFlags, open: openMMVKind},
}

// opened is what the kinds opened so far.
type opened struct {
	srcs    []bridge.Source
	closers []func()
	// count is the number of sources of each kind
	count map[string]int
	// auto: no source flag was given and the local pmcd answered
	auto bool
}

// add appends one source of kind.
func (o *opened) add(kind string, s bridge.Source) {
	o.srcs = append(o.srcs, s)
	o.count[kind]++
}

// onClose adds a function to run at close, in reverse order.
func (o *opened) onClose(f func()) { o.closers = append(o.closers, f) }

// close closes everything opened, the last first.
func (o *opened) close() {
	for i := len(o.closers) - 1; i >= 0; i-- {
		o.closers[i]()
	}
}

// openServeSources opens the sources serve exports, kind by kind.
func openServeSources(f *serveFlags, logger *slog.Logger) ([]bridge.Source, func(), error) {
	o := &opened{count: map[string]int{}}
	for _, k := range sourceKinds {
		if err := k.open(f, o, logger); err != nil {
			o.close()
			return nil, nil, err
		}
	}
	return o.srcs, o.close, nil
}

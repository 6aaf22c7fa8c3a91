package main

import (
	"log/slog"

	"github.com/alecthomas/kingpin/v2"

	"github.com/pcp-exporter/pcp-exporter/bridge"
)

// sourceKind is one kind of PCP source: the flags that name it in serve,
// and its openers, serve's and the one of the commands that read their
// sources once (fetch, info, mapping).
type sourceKind struct {
	kind string
	// flags declares the kind's flags of serve into f.
	flags func(cmd *kingpin.CmdClause, f *serveFlags)
	// open opens the sources of this kind that f names, into o.
	open func(f *serveFlags, o *opened, logger *slog.Logger) error
	// once opens the sources of this kind that a command reading them
	// once names in f (none when f has no flag of the kind), into o.
	once func(f *onceFlags, o *opened, logger *slog.Logger) error
}

// sourceKinds are the kinds of source serve reads, in the order they are
// opened: pmcd first (with no source flag at all, the local pmcd is
// served when it answers), then archives (followed, replayed, or the
// demo), then the MMV directory, which goes when nothing else is named
// (or when it is named, or next to the local pmcd found so).
var sourceKinds = []sourceKind{
	{kind: "pmcd", flags: pmcdKindFlags, open: openPMCDKind, once: openPMCDOnce},
	{kind: "archive", flags: archiveKindFlags, open: openArchiveKind, once: openArchivesOnce},
	{kind: "mmv", flags: mmvKindFlags, open: openMMVKind, once: openMMVOnce},
}

// onceFlags are the source flags of a command that reads its sources
// once (fetch, info, mapping): each command declares those of the kinds
// it reads (nil: a kind it does not).
type onceFlags struct {
	pmcd     *pmcdFlags
	mmv      *mmvFlags
	archives *[]string
	// apart: each archive is a source of its own (info), else they are
	// replayed as one timeline (mapping)
	apart  bool
	logger *slog.Logger // of the sources opened (nil: none)
}

// openOnce opens the sources f names, of these kinds in this order, from
// the registry.
func openOnce(f *onceFlags, kinds ...string) (*opened, error) {
	o := &opened{count: map[string]int{}}
	for _, kind := range kinds {
		for _, k := range sourceKinds {
			if k.kind != kind {
				continue
			}
			if err := k.once(f, o, f.logger); err != nil {
				o.close()
				return nil, err
			}
		}
	}
	return o, nil
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

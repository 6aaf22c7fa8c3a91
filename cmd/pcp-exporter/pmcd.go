package main

import (
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/pcp-exporter/pcp-exporter/bridge"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/pmcd"
)

// pmcdFlags are the pmcd source flags of serve, info and fetch.
type pmcdFlags struct {
	specs   []string
	metrics []string
	timeout time.Duration
	limit   int
	auth    *authFlags
}

// addPMCDFlags declares --pmcd (repeatable for serve), --pmcd.metrics and
// --pmcd.timeout.
func addPMCDFlags(cmd *kingpin.CmdClause, repeatable bool) *pmcdFlags {
	f := &pmcdFlags{}
	help := "pmcd to read: local: (its unix socket, else TCP localhost), unix:PATH, or HOST[:PORT]; a bare --pmcd is local:."

	if repeatable {
		help += " Repeatable: each pmcd is a source (told apart by its hostname label)."
	}
	cmd.Flag("pmcd", help).PlaceHolder("SPEC").StringsVar(&f.specs)
	cmd.Flag("pmcd.metrics", "Metrics of pmcd to export: a name (with its subtree, as pminfo) or a glob over the whole name (* crosses dots), as the mapping file's include/exclude and ?names=; a leading - excludes (repeatable; default all, less the mmv subtree when the MMV directory is exported directly).").PlaceHolder("PATTERN").StringsVar(&f.metrics)
	cmd.Flag("pmcd.timeout", "Deadline of connecting to pmcd and of each fetch (a hung PMDA costs a scrape at most this).").Default("5s").DurationVar(&f.timeout)
	cmd.Flag("pmcd.series-limit", "Most values a fetch of one pmcd serves, and instances of an instance domain kept, as Prometheus's sample_limit; the rest are left out, counted (pcp_exporter_series_left_out) and logged once (-1: no limit).").Default(strconv.Itoa(pmcd.DefaultSeriesLimit)).IntVar(&f.limit)
	f.auth = addAuthFlags(cmd)
	return f
}

// pmcdArgs rewrites a bare --pmcd (last, or followed by another flag) to
// --pmcd=local:, so that the flag's value is optional. In fetch, whose
// arguments are metric names, a bare --pmcd followed by a word shaped
// like a PCP metric name (pcpName; localhost excepted) is local: too and
// the word stays an argument: `fetch --pmcd kernel.all.load`. It returns
// that word ("" if none), for the hint of fetch's unknown metric.
func pmcdArgs(args []string) (out []string, metricAfter string) {
	out = append([]string(nil), args...)
	fetch := false
	for _, a := range out {
		if !strings.HasPrefix(a, "-") {
			fetch = a == "fetch"
			break
		}
	}
	for i, a := range out {
		if a != "--pmcd" {
			continue
		}
		switch {
		case i+1 == len(out) || strings.HasPrefix(out[i+1], "-"):
			out[i] = "--pmcd=local:"
		case fetch && pcpName.MatchString(out[i+1]) && out[i+1] != "localhost":
			out[i] = "--pmcd=local:"
			metricAfter = out[i+1]
		}
	}
	return out, metricAfter
}

// metricAfterPMCD is the word pmcdArgs left as fetch's metric after a bare
// --pmcd.
var metricAfterPMCD string

// pcpName is the form of a PCP metric name or subtree (PMNS components:
// a letter, then letters, digits and underscores).
var pcpName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)*$`)

// options builds the source options; excludeMMV drops pmcd's mmv subtree
// (the MMV directory is exported directly), excludes are more "-subtree"
// patterns.
func (f *pmcdFlags) options(logger *slog.Logger, excludeMMV bool, excludes ...string) (pmcd.Options, error) {
	pats := append(append([]string(nil), f.metrics...), excludes...)
	if excludeMMV {
		pats = append(pats, "-mmv")
	}
	sel, err := pmcd.ParseSelection(pats)
	if err != nil {
		return pmcd.Options{}, usagef("--pmcd.metrics: %v", err)
	}
	if f.limit == 0 {
		return pmcd.Options{}, usagef("--pmcd.series-limit: 0 (use -1 for no limit)")
	}
	sec, err := f.auth.security()
	if err != nil {
		return pmcd.Options{}, err
	}
	return pmcd.Options{Selection: sel, Timeout: f.timeout, Logger: logger, SeriesLimit: f.limit, Security: sec}, nil
}

// openOne opens one pmcd for info and fetch (openPMCDOnce): it must
// answer now.
func (f *pmcdFlags) openOne(logger *slog.Logger) (*pmcd.Source, error) {
	if len(f.specs) != 1 {
		return nil, usagef("name one pmcd")
	}
	opts, err := f.options(logger, false)
	if err != nil {
		return nil, err
	}
	return pmcd.Open(f.specs[0], opts)
}

// openPMCDOnce opens the one pmcd a command reading once names: it must
// answer now.
func openPMCDOnce(f *onceFlags, o *opened, _ *slog.Logger) error {
	if f.pmcd == nil || len(f.pmcd.specs) == 0 {
		return nil
	}
	p, err := f.pmcd.openOne(nil)
	if err != nil {
		return err
	}
	o.onClose(func() { p.Close() })
	o.add("pmcd", bridge.Source{Name: "pmcd " + p.Endpoint().String(), Src: p})
	return nil
}

// pmcdFetchError is the error of a fetch from a pmcd that went away.
func pmcdFetchError(src source.Source) error {
	if st := source.StatusOf(src, time.Now()); st.Reason != source.ReasonUp {
		return fmt.Errorf("%s", st.Detail)
	}
	return nil
}

// pmcdKindFlags declares serve's pmcd flags: --pmcd (repeatable), its
// options, and the process groups made of its proc agent.
func pmcdKindFlags(cmd *kingpin.CmdClause, f *serveFlags) {
	f.pmcd = addPMCDFlags(cmd, true)
	f.groups = addGroupFlags(cmd)
}

// openPMCDKind opens serve's pmcd sources. With no source flag at all
// (no --pmcd, --archive or --mmv.dir), the local pmcd is exported when it
// answers, next to the MMV directory: o.auto is then true. A pmcd named
// with --pmcd that does not answer yet is a source that is down until it
// does.
func openPMCDKind(f *serveFlags, o *opened, logger *slog.Logger) error {
	pf := f.pmcd
	specs := pf.specs
	auto := false
	if len(specs) == 0 && len(f.archives) == 0 && !f.mmvDirSet && !f.demo {
		probe, err := pmcd.New("local:", pmcd.Options{Timeout: time.Second})
		if err == nil && probe.Ping() == nil {
			specs, auto = []string{"local:"}, true
			logger.Info("no source flag and the local pmcd answers: serving pmcd and the MMV directory", "mmv.dir", f.mmvDir)
		}
	}
	o.auto = auto
	f.lean.metrics = pf.metrics
	opts, err := pf.options(logger, auto || f.mmvDirSet, f.lean.pmcdExcludes(f.groups != nil && (f.groups.on || f.groups.match != ""))...)
	if err != nil {
		return err
	}
	// every pmcd is read at once, and serving starts after --pmcd.timeout
	// at the latest: a pmcd still reading its metadata is down until done
	ps := make([]*pmcd.Source, len(specs))
	for i, spec := range specs {
		p, err := pmcd.New(spec, opts)
		if err != nil {
			return usagef("--pmcd: %v", err)
		}
		o.onClose(func() { p.Close() })
		_ = p.ConnectBy(time.Now()) // starts the read
		ps[i] = p
	}
	deadline := time.Now().Add(opts.Timeout)
	for i, p := range ps {
		if err := p.ConnectBy(deadline); err != nil {
			logger.Warn("pmcd does not answer yet; its source is down until it does", "pmcd", specs[i], "err", err)
		}
		var src source.Source = p
		if src, err = f.groups.wrap(src); err != nil {
			return err
		}
		if src, err = f.derived.wrap(src, logger); err != nil {
			return err
		}
		o.add("pmcd", bridge.Source{Name: "pmcd " + p.Endpoint().String(), Src: src})
	}
	return nil
}

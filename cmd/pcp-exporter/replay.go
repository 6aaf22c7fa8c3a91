package main

import (
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/archive"
)

// replayFlags are the flags of replay.
type replayFlags struct {
	args     []string
	start    string
	finish   string
	interval time.Duration
	samples  int
	interp   string
	format   string
}

func init() {
	addCommand(command{
		name: "replay",
		help: "Print the values of archives interpolated at regular times, as libpcp's interpolation mode gives them.",
		setup: func(cmd *kingpin.CmdClause) func() error {
			f := &replayFlags{}
			cmd.Flag("start", "First sample time: RFC 3339, or +DURATION after the archive's start.").Default("+0s").StringVar(&f.start)
			cmd.Flag("interval", "Time between samples.").Default("1s").DurationVar(&f.interval)
			cmd.Flag("samples", "Number of samples (0: until the end of the archive or --finish).").Default("0").IntVar(&f.samples)
			cmd.Flag("finish", "Last sample time at most: RFC 3339, or +DURATION after the archive's start.").StringVar(&f.finish)
			cmd.Flag("interp", "Interpolation rule for instant and discrete metrics: nearest (PCP 6.3.2 and later) or prior (PCP 6.3.1 and earlier).").Default("nearest").EnumVar(&f.interp, "nearest", "prior")
			cmd.Flag("format", "Output format: csv or json.").Default("csv").EnumVar(&f.format, "csv", "json")
			dflags := addDerivedFlags(cmd)
			cmd.Arg("archive-or-metric", "Archives (base names, files of an archive, or directories of archives), then metrics or subtrees (all when none is given).").Required().StringsVar(&f.args)
			return func() error {
				logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
				batchGC()
				return runReplay(os.Stdout, f, dflags, logger)
			}
		},
	})
}

// batchGC tunes the garbage collector for a command that runs to its end
// with a bounded heap (replay), unless GOGC or GOMEMLIMIT is set: a
// collection at five times the live heap (GOGC=400) within a soft limit
// of 48 MiB (GOMEMLIMIT), as the Go GC guide pairs them. A replay of W2
// then runs no collection at all (the default starts one at 4 MB: 2.5 ms
// of a 32 ms replay), and a replay of every metric of a 1 GB archive stays
// near 55 MiB of peak RSS (the goal is under 64 MiB).
func batchGC() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetGCPercent(400)
	debug.SetMemoryLimit(48 << 20)
}

// splitArchiveArgs separates the leading archive arguments from the metric
// names that follow them.
func splitArchiveArgs(args []string) (paths, metrics []string) {
	for i, a := range args {
		if !archive.IsArchivePath(a) {
			return paths, args[i:]
		}
		paths = append(paths, a)
	}
	return paths, nil
}

// parseWhen parses an RFC 3339 time or +DURATION after origin.
func parseWhen(s string, origin time.Time) (time.Time, error) {
	if rest, ok := strings.CutPrefix(s, "+"); ok {
		d, err := time.ParseDuration(rest)
		if err != nil {
			if secs, err2 := strconv.ParseFloat(rest, 64); err2 == nil {
				return origin.Add(time.Duration(secs*1e9 + 0.5)), nil
			}
			return time.Time{}, usagef("bad time %q: %v", s, err)
		}
		return origin.Add(d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, usagef("bad time %q: want RFC 3339 or +DURATION", s)
	}
	return t, nil
}

func runReplay(w io.Writer, f *replayFlags, dflags *derivedFlags, logger *slog.Logger) error {
	paths, names := splitArchiveArgs(f.args)
	if len(paths) == 0 {
		return usagef("%s: no such archive", f.args[0])
	}
	if f.interval <= 0 {
		return usagef("--interval must be positive")
	}
	as, err := archive.OpenAll(paths)
	if err != nil {
		return err
	}
	rule := semantics.InterpNearest
	if f.interp == "prior" {
		rule = semantics.InterpPrior
	}
	rp, err := archive.NewReplay(as, archive.ReplayOptions{Interp: rule})
	if err != nil {
		return err
	}
	var src source.Source = rp
	defer src.Close()
	if src, err = dflags.wrap(src, logger); err != nil {
		return err
	}
	metrics, err := selectMetrics(src.Metrics(), names)
	if err != nil {
		return err
	}
	start, err := parseWhen(f.start, rp.Start())
	if err != nil {
		return err
	}
	end, err := rp.End()
	if err != nil {
		return err
	}
	if f.finish != "" {
		fin, err := parseWhen(f.finish, rp.Start())
		if err != nil {
			return err
		}
		if fin.Before(end) {
			end = fin
		}
	}
	pmids := make([]semantics.PMID, len(metrics))
	for i, m := range metrics {
		pmids[i] = m.Desc.PMID
	}
	rows := newCSVRows(metrics, src)
	// the rows go out from their own buffer, 64 KiB or more at a time (a
	// buffered writer would copy them once more)
	var buf []byte
	if f.format == "csv" {
		buf = append(buf, csvHeader...)
	}
	var res source.Result
	for i := 0; f.samples <= 0 || i < f.samples; i++ {
		t := start.Add(time.Duration(i) * f.interval)
		if t.After(end) {
			break
		}
		if err := src.Fetch(t, pmids, &res); err != nil {
			if _, werr := w.Write(buf); werr != nil {
				return werr
			}
			return err
		}
		if f.format == "json" {
			buf = appendFetchJSON(buf, &res, metrics)
		} else {
			buf = rows.append(buf, &res)
		}
		if len(buf) >= 1<<16 {
			if _, err := w.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	_, err = w.Write(buf)
	return err
}

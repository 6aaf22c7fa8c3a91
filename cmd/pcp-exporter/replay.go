package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/archive"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
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

func replayCommand() command {
	return command{
		name: "replay",
		help: "Print the values of archives interpolated at regular times, as libpcp's interpolation mode gives them. CSV columns: time,metric,instance_id,instance,value, each instance named as at the sample's time. An archive whose last record is cut short, or whose volume ends in zeros (a crashed pmlogger's tail), is reported on stderr after the values before it; a value logged in an encoding its metric's type contradicts ends the output with libpcp's \"Corrupted record\" error.",
		setup: func(cmd *kingpin.CmdClause) func() error {
			f := &replayFlags{}
			cmd.Flag("start", "First sample time: RFC 3339, or +DURATION after the archive's start.").Default("+0s").StringVar(&f.start)
			cmd.Flag("interval", "Time between samples.").Default("1s").DurationVar(&f.interval)
			cmd.Flag("samples", "Number of samples (0: until the end of the archive or --finish, at most 10,000,000).").Default("0").IntVar(&f.samples)
			cmd.Flag("finish", "Last sample time at most: RFC 3339, or +DURATION after the archive's start.").StringVar(&f.finish)
			cmd.Flag("interp", "Interpolation rule for instant and discrete metrics: nearest (PCP 6.3.2 and later) or prior (PCP 6.3.1 and earlier).").Default("nearest").EnumVar(&f.interp, "nearest", "prior")
			cmd.Flag("format", "Output format: csv or json.").Default("csv").EnumVar(&f.format, "csv", "json")
			dflags := addDerivedFlags(cmd)
			cmd.Arg("archive-or-metric", "Archives (base names, files of an archive, or directories of archives), then metrics or subtrees (all when none is given).").Required().StringsVar(&f.args)
			return func() error {
				logger := clipLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
				batchGC()
				return runReplay(os.Stdout, f, dflags, logger)
			}
		},
	}
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
		if !pcplog.IsArchivePath(a) {
			return paths, args[i:]
		}
		paths = append(paths, a)
	}
	return paths, nil
}

// maxSamples bounds replay's sample count when --samples does not give it:
// a tiny --interval over a long archive would write without end (1 ns over
// 30 minutes: 1.8e12 samples).
const maxSamples = 10_000_000

func runReplay(w io.Writer, f *replayFlags, dflags *derivedFlags, logger *slog.Logger) error {
	paths, names := splitArchiveArgs(f.args)
	if len(paths) == 0 {
		return usagef("%s: no such archive", f.args[0])
	}
	if f.interval <= 0 {
		return usagef("--interval=%v: want a positive duration", f.interval)
	}
	if f.samples < 0 {
		return usagef("--samples=%d: want 0 (to the end) or more", f.samples)
	}
	as, err := pcplog.OpenAll(paths)
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
	start, err := parseWhen("start", f.start, rp.Start())
	if err != nil {
		return err
	}
	end, err := rp.End()
	if err != nil {
		return err
	}
	var fin time.Time
	if f.finish != "" {
		if fin, err = parseWhen("finish", f.finish, rp.Start()); err != nil {
			return err
		}
	}
	if err := checkWindow(start, fin, rp.Start(), end, "start", "finish"); err != nil {
		return err
	}
	if !fin.IsZero() && fin.Before(end) {
		end = fin
	}
	if n := end.Sub(start)/f.interval + 1; f.samples == 0 && n > maxSamples {
		return usagef("--interval=%v: %d samples from %s to %s, more than %d; give a longer --interval, a --finish or --samples",
			f.interval, n, start.Format(time.RFC3339Nano), end.Format(time.RFC3339Nano), maxSamples)
	}
	pmids := make([]semantics.PMID, len(metrics))
	for i, m := range metrics {
		pmids[i] = m.Desc.PMID
	}
	rows, js := newCSVRows(metrics, src), newJSONLines(metrics)
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
			buf = js.append(buf, res.Time, false, res.Sets)
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
	reportTruncated("replay", as)
	return err
}

// reportTruncated says on stderr, one line each, which archives end with a
// record cut short (the values before it are answered).
func reportTruncated(cmd string, as []*pcplog.Archive) {
	for _, a := range as {
		if err := a.Truncated(); err != nil {
			fmt.Fprintf(os.Stderr, "pcp-exporter %s: warning: %v\n", cmd, err)
		}
	}
}

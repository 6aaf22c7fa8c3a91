package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"golang.org/x/sys/unix"

	"github.com/pcp-exporter/pcp-exporter/bridge"
	"github.com/pcp-exporter/pcp-exporter/bridge/backfill"
	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

// backfillGOGC is the garbage collector's target percentage for backfill
// when GOGC is not set.
const backfillGOGC = 300

type backfillFlags struct {
	archives   []string
	output     string
	step       time.Duration
	stepSet    bool
	raw        bool
	start      string
	finish     string
	interp     string
	mapping    string
	naming     string
	lean       leanFlags
	fullLabels bool
	derived    *derivedFlags
	quiet      bool
	labels     []string
	failFast   bool
	timeout    time.Duration
	omCreated  bool
	textfile   string

	otlpInsecure bool
	otlpHeaders  map[string]string
}

func backfillCommand() command {
	return command{
		name: "backfill",
		help: "Write the history of PCP archives into Prometheus TSDB blocks, remote write, OTLP or an OpenMetrics file, mapped as serve maps them.",
		setup: func(cmd *kingpin.CmdClause) func() error {
			f := &backfillFlags{}
			cmd.Arg("archive", "Archives (base names, files of an archive, or directories of archives) forming one timeline.").Required().StringsVar(&f.archives)
			cmd.Flag("output", "Destination: tsdb:DIR, remote-write:URL, otlp-grpc:HOST:PORT, otlp-http:URL or openmetrics:FILE.").Required().StringVar(&f.output)
			cmd.Flag("step", "Write values interpolated at every multiple of this step (as replay gives them).").IsSetByUser(&f.stepSet).DurationVar(&f.step)
			cmd.Flag("raw", "Write every recorded value with its own timestamp (the default when --step is not given).").BoolVar(&f.raw)
			cmd.Flag("start", "First time: RFC 3339, or +DURATION after the archive's start.").StringVar(&f.start)
			cmd.Flag("finish", "Last time: RFC 3339, or +DURATION after the archive's start.").StringVar(&f.finish)
			cmd.Flag("interp", "Interpolation rule with --step: nearest or prior.").Default("nearest").EnumVar(&f.interp, "nearest", "prior")
			cmd.Flag("mapping.config", "Mapping configuration file (as for serve).").PlaceHolder("FILE").StringVar(&f.mapping)
			cmd.Flag("naming", "Naming: default, pmproxy, node or hostmetrics (as for serve).").EnumVar(&f.naming, "default", "pmproxy", "node", "hostmetrics")
			fullLabelsFlag(cmd, &f.fullLabels)
			withFlag(cmd, &f.lean)
			cmd.Flag("quiet", "No progress display.").BoolVar(&f.quiet)
			cmd.Flag("label", "A label added to every series, replacing a mapped one of the same name (NAME=VALUE, repeatable): job and instance join backfilled series with scraped ones.").PlaceHolder("NAME=VALUE").StringsVar(&f.labels)
			cmd.Flag("fail-fast", "Stop at the first batch the destination rejects (by default it is counted, reported and the backfill goes on).").BoolVar(&f.failFast)
			cmd.Flag("remote-write.timeout", "With remote-write: timeout of one request; a request without an answer is sent again (see the README on duplicates).").Default("30s").DurationVar(&f.timeout)
			cmd.Flag("openmetrics.created", "With openmetrics:FILE, a _created sample after each counter sample: the archive's start or its last <mark> before it, or the sample before a reset (README: Counter starts). Off by default, as in promhttp: Prometheus 2.x (and 3.x unless its created-timestamp zero ingestion is on) stores each _created as a series of its own.").BoolVar(&f.omCreated)
			cmd.Flag("metrics.textfile", "At the end of the run (success or not), write its metrics (pcp_exporter_backfill_*: samples read, written, rejected by reason, skipped by reason, success, time) into this NAME.prom file for node_exporter's textfile collector (its --collector.textfile.directory), atomically; the series carry backfill=\"NAME\".").PlaceHolder("FILE").StringVar(&f.textfile)
			cmd.Flag("otlp.insecure", "With otlp-grpc: no TLS.").BoolVar(&f.otlpInsecure)
			f.otlpHeaders = map[string]string{}
			cmd.Flag("otlp.headers", "With otlp-*: a header sent with every request (KEY=VALUE, repeatable).").StringMapVar(&f.otlpHeaders)
			f.derived = addDerivedFlags(cmd)
			return func() error { return runBackfill(f, os.Stderr) }
		},
	}
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// runBackfill runs a backfill; with --metrics.textfile it writes the run's
// metrics whatever its outcome.
func runBackfill(f *backfillFlags, stderr io.Writer) error {
	if f.textfile != "" {
		if err := backfill.CheckTextfile(f.textfile); err != nil {
			return usagef("--metrics.textfile %v", err)
		}
	}
	began := time.Now()
	var st backfill.Stats
	err := backfillRun(f, stderr, &st)
	if f.textfile != "" {
		if werr := backfill.WriteTextfile(f.textfile, st, began, time.Now(), err); werr != nil {
			return errors.Join(err, werr)
		}
	}
	return err
}

func backfillRun(f *backfillFlags, stderr io.Writer, stp *backfill.Stats) error {
	if f.raw && f.step > 0 {
		return usagef("--raw and --step exclude each other")
	}
	if f.step < 0 || (f.stepSet && f.step == 0) {
		return usagef("--step=%v: want a positive duration (or --raw)", f.step)
	}
	kind, dest, ok := strings.Cut(f.output, ":")
	if !ok || dest == "" {
		return usagef("--output %q: want tsdb:DIR, remote-write:URL, otlp-grpc:HOST:PORT, otlp-http:URL or openmetrics:FILE", f.output)
	}
	if os.Getenv("GOGC") == "" {
		// a batch job whose memory is bounded by design (replay state,
		// one batch in flight, the TSDB head of one block): collecting
		// garbage a third as often costs ~20 MB and saves ~4% of the time
		debug.SetGCPercent(backfillGOGC)
	}
	logger := clipLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	mapper, err := newMapper(f.mapping, f.naming, f.fullLabels, &f.lean)
	if err != nil {
		return err
	}
	as, err := pcplog.OpenAll(f.archives)
	if err != nil {
		return err
	}
	defer func() {
		reportTruncated("backfill", as)
		for _, a := range as {
			a.Close()
		}
	}()
	opts, err := backfillOptions(f, as, mapper, logger)
	if err != nil {
		return err
	}
	tty := !f.quiet && isTerminal(os.Stderr)
	began := time.Now()
	if tty {
		opts.Progress = func(st backfill.Stats) {
			fmt.Fprintf(stderr, "\r%s  %d samples read, %d written, %.0fs   ", st.Progress.UTC().Format(time.RFC3339), st.Read, st.Written, time.Since(began).Seconds())
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second signal ends the process at once
	}()
	write, err := backfillOutput(ctx, f, kind, dest, logger)
	if err != nil {
		return err
	}
	st, err := write(ctx, opts)
	*stp = st
	if tty {
		fmt.Fprintln(stderr)
	}
	printSummary(stderr, kind, st, time.Since(began))
	if errors.Is(err, context.Canceled) {
		return errors.New("interrupted")
	}
	if err != nil {
		return err
	}
	if st.Rejected > 0 {
		return fmt.Errorf("%d samples were rejected by %s (first: %s)", st.Rejected, kind, strings.Join(st.Errors[:min(1, len(st.Errors))], ""))
	}
	return nil
}

// printSummary says what became of the samples: written counts only those
// the destination accepted (acknowledged by a receiver).
func printSummary(w io.Writer, kind string, st backfill.Stats, took time.Duration) {
	fmt.Fprintf(w, "backfill: %d samples read, %d written (accepted by %s), %d rejected, %d not sent, %d series", st.Read, st.Written, kind, st.Rejected, st.Unsent, st.Series)
	if !st.First.IsZero() {
		fmt.Fprintf(w, ", %s .. %s", st.First.UTC().Format(time.RFC3339Nano), st.Last.UTC().Format(time.RFC3339Nano))
	}
	fmt.Fprintf(w, " in %.2fs\n", took.Seconds())
	if st.Unanswered > 0 {
		fmt.Fprintf(w, "backfill: %d sent without an answer when the run stopped: %s may hold them\n", st.Unanswered, kind)
	}
	if st.Duplicated > 0 {
		fmt.Fprintf(w, "backfill: %d possibly duplicated: sent again after a lost answer, %s may hold them twice\n", st.Duplicated, kind)
	}
	var reasons []string
	for k := range st.Skipped {
		reasons = append(reasons, k)
	}
	sort.Strings(reasons)
	for _, k := range reasons {
		fmt.Fprintf(w, "backfill: skipped %d %s\n", st.Skipped[k], skippedWhat(k))
	}
	reasons = reasons[:0]
	for k := range st.RejectedBy {
		reasons = append(reasons, k)
	}
	sort.Strings(reasons)
	for _, k := range reasons {
		fmt.Fprintf(w, "backfill: rejected %d (%s)\n", st.RejectedBy[k], k)
	}
	for _, e := range st.Errors {
		fmt.Fprintf(w, "backfill: rejected: %s\n", e)
	}
}

// skippedWhat says what a Skipped reason of backfill.Stats counts.
func skippedWhat(reason string) string {
	if e, ok := strings.CutPrefix(reason, backfill.SkippedError); ok {
		return fmt.Sprintf("value sets the archive records as a PCP error instead of values (%q, as pmdumplog prints it): no sample", e)
	}
	what := map[string]string{
		"aggregate":        "of type aggregate (no number to export)",
		"event":            "of event records (not exported)",
		"string":           "of type string (--naming pmproxy omits them, as pmproxy does)",
		"unsupported_type": "of an unsupported type",
		"excluded":         "excluded by the mapping file's include/exclude",
		"name_clash":       "whose Prometheus name another metric has (pcp-exporter mapping shows which)",
	}
	r := strings.TrimPrefix(reason, "metric_")
	if w, ok := what[r]; ok {
		return "metrics " + w
	}
	return "(" + reason + ")"
}

// backfillOptions are the backfill's options from the flags: labels, the
// interpolation rule, the window (checked against the archives' time span)
// and derived metrics.
func backfillOptions(f *backfillFlags, as []*pcplog.Archive, mapper *mapping.Mapper, logger *slog.Logger) (backfill.Options, error) {
	var err error
	origin := as[0].Label().Start
	for _, a := range as {
		if a.Label().Start.Before(origin) {
			origin = a.Label().Start
		}
	}
	opts := backfill.Options{Archives: as, Mapper: mapper, Step: f.step, FailFast: f.failFast}
	seen := map[string]bool{}
	for _, l := range f.labels {
		lp, err := backfill.ParseLabel(l)
		if err != nil {
			return opts, usagef("--label: %v", err)
		}
		if seen[lp.Name] {
			return opts, usagef("--label: %s given twice", lp.Name)
		}
		seen[lp.Name] = true
		opts.Labels = append(opts.Labels, lp)
	}
	if f.interp == "prior" {
		opts.Interp = semantics.InterpPrior
	}
	if f.start != "" {
		if opts.Start, err = parseWhen("start", f.start, origin); err != nil {
			return opts, err
		}
	}
	if f.finish != "" {
		if opts.Finish, err = parseWhen("finish", f.finish, origin); err != nil {
			return opts, err
		}
	}
	if f.start != "" || f.finish != "" {
		var last time.Time
		for _, a := range as {
			e, err := a.End()
			if err != nil {
				return opts, err
			}
			if e.After(last) {
				last = e
			}
		}
		if err := checkWindow(opts.Start, opts.Finish, origin, last, "start", "finish"); err != nil {
			return opts, err
		}
	}
	if f.derived != nil && f.derived.config != "" {
		if f.step == 0 {
			return opts, usagef("--derived.config needs --step: derived metrics are evaluated at fetch times")
		}
		opts.Wrap = func(src source.Source) (source.Source, error) { return f.derived.wrap(src, logger) }
	}
	return opts, nil
}

// backfillOutput opens the --output destination (kind:dest) and returns
// the function that writes a backfill to it and closes it.
func backfillOutput(ctx context.Context, f *backfillFlags, kind, dest string, logger *slog.Logger) (func(context.Context, backfill.Options) (backfill.Stats, error), error) {
	runSink := func(sink backfill.Sink) func(context.Context, backfill.Options) (backfill.Stats, error) {
		return func(ctx context.Context, opts backfill.Options) (backfill.Stats, error) {
			st, err := backfill.Run(ctx, opts, sink)
			if cerr := sink.Close(); err == nil {
				err = cerr
			}
			return st, err
		}
	}
	switch kind {
	case "tsdb":
		sink := backfill.NewTSDBSink(dest, logger)
		return runSink(sink), nil
	case "remote-write":
		sink := backfill.NewRemoteWriteSink(dest, logger)
		if f.timeout <= 0 {
			return nil, usagef("--remote-write.timeout must be positive")
		}
		sink.Client.Timeout = f.timeout
		return runSink(sink), nil
	case "openmetrics":
		out, err := os.Create(dest)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, opts backfill.Options) (backfill.Stats, error) {
			opts.TempDir = filepath.Dir(dest)
			st, err := backfill.WriteOpenMetrics(ctx, opts, out, f.omCreated)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			return st, err
		}, nil
	case "otlp-grpc", "otlp-http":
		oc := &bridge.OTLPConfig{Endpoint: dest, Protocol: "grpc", Timeout: 30 * time.Second, Interval: 5 * time.Minute, Insecure: f.otlpInsecure, Headers: f.otlpHeaders, NoRetry: true}
		if kind == "otlp-http" {
			u, client, err := oc.HTTPTarget()
			if err != nil {
				return nil, fmt.Errorf("otlp: %w", err)
			}
			return runSink(backfill.NewOTLPHTTPSink(u, client, f.otlpHeaders, logger)), nil
		}
		exp, err := oc.Exporter(ctx)
		if err != nil {
			return nil, fmt.Errorf("otlp: %w", err)
		}
		return runSink(backfill.NewOTLPSink(exp, logger)), nil
	}
	return nil, usagef("--output %q: unknown destination %q", f.output, kind)
}

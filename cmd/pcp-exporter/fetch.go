package main

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/pcp-exporter/pcp-exporter/bridge"
	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

func fetchCommand() command {
	return command{
		name: "fetch",
		help: "Print the current values of an MMV file or directory, or of a pmcd.",
		setup: func(cmd *kingpin.CmdClause) func() error {
			mf := addMMVFlags(cmd, false)
			pf := addPMCDFlags(cmd, false)
			format := cmd.Flag("format", "Output format: csv, json or openmetrics (the exposition serve gives, mapped by --naming and --mapping.config).").Default("csv").Enum("csv", "json", "openmetrics")
			mappingFile := cmd.Flag("mapping.config", "Mapping configuration file for --format openmetrics (as for serve).").PlaceHolder("FILE").String()
			naming := cmd.Flag("naming", "Naming for --format openmetrics: default, pmproxy, node or hostmetrics (as for serve).").Enum("default", "pmproxy", "node", "hostmetrics")
			fullLabels := new(bool)
			fullLabelsFlag(cmd, fullLabels)
			created := cmd.Flag("openmetrics.created", "With --format openmetrics, a _created sample after each counter sample whose start is known: the MMV file's creation, pmcd's start, an archive's start or last <mark> (README: Counter starts). Off by default, as in promhttp: Prometheus 2.x (and 3.x unless its created-timestamp zero ingestion is on) stores each _created as a series of its own.").Bool()
			lean := &leanFlags{}
			withFlag(cmd, lean)
			dflags := addDerivedFlags(cmd)
			names := cmd.Arg("metric", "Metrics or subtrees to fetch (all when none is given). A PCP metric name right after a bare --pmcd is one of these (fetch --pmcd kernel.all.load reads the local pmcd): write a pmcd host there as --pmcd=HOST or HOST:PORT.").Strings()
			return func() error {
				var mapper *mapping.Mapper
				if *format == "openmetrics" {
					var err error
					lean.metrics = append(append([]string(nil), pf.metrics...), *names...)
					if mapper, err = newMapper(*mappingFile, *naming, *fullLabels, lean); err != nil {
						return err
					}
				}
				logger := clipLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
				if (mf.path == "") == (len(pf.specs) == 0) {
					return usagef("name one source: --mmv or --pmcd")
				}
				o, err := openOnce(&onceFlags{mmv: mf, pmcd: pf, logger: logger}, "mmv", "pmcd")
				if err != nil {
					return err
				}
				defer o.close()
				one := o.srcs[0]
				src, name := one.Src, one.Name
				if src, err = dflags.wrap(src, logger); err != nil {
					return err
				}
				if mapper != nil {
					src = mapper.Wrap(src) // the node naming's families
					err = fetchOpenMetrics(os.Stdout, src, name, *names, mapper, *created, logger, one.Context)
				} else {
					err = fetchValues(os.Stdout, src, *names, *format)
				}
				if metricAfterPMCD != "" && err != nil && err.Error() == metricAfterPMCD+": Unknown metric name" {
					err = fmt.Errorf("%w in %s (a bare --pmcd followed by a metric name reads the local pmcd: write a pmcd host as --pmcd=%s)", err, name, metricAfterPMCD)
				}
				return err
			}
		},
	}
}

// selectMetrics expands metric names and subtrees (in argument order, each
// subtree in name order) as PCP tools do; all metrics when none is given.
func selectMetrics(metrics []source.Metric, args []string) ([]source.Metric, error) {
	byName := func(i, j int) bool { return metrics[i].Name < metrics[j].Name }
	sorted := metrics
	if !sort.SliceIsSorted(metrics, byName) { // archives list theirs in order
		sorted = append([]source.Metric(nil), metrics...)
		sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	}
	if len(args) == 0 {
		return append([]source.Metric(nil), sorted...), nil
	}
	// the metric itself, then its subtree: each a stretch of the sorted list
	at := func(name string) int {
		return sort.Search(len(sorted), func(i int) bool { return sorted[i].Name >= name })
	}
	var out []source.Metric
	for _, a := range args {
		n := len(out)
		if i := at(a); i < len(sorted) && sorted[i].Name == a {
			out = append(out, sorted[i])
		}
		prefix := a + "."
		for i := at(prefix); i < len(sorted) && strings.HasPrefix(sorted[i].Name, prefix); i++ {
			out = append(out, sorted[i])
		}
		if len(out) == n {
			if len(a) > maxEcho {
				a = clip(a)
			}
			return nil, fmt.Errorf("%s: Unknown metric name", a)
		}
	}
	return out, nil
}

// fetchValues fetches the selected metrics once and writes them.
func fetchValues(w io.Writer, src source.Source, args []string, format string) error {
	metrics, err := selectMetrics(src.Metrics(), args)
	if err != nil {
		return err
	}
	pmids := make([]semantics.PMID, len(metrics))
	for i, m := range metrics {
		pmids[i] = m.Desc.PMID
	}
	var res source.Result
	if err := src.Fetch(time.Now(), pmids, &res); err != nil {
		return err
	}
	if err := pmcdFetchError(src); err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	switch format {
	case "json":
		bw.Write(newJSONLines(metrics).append(nil, res.Time, false, res.Sets))
	default:
		bw.WriteString(csvHeader)
		bw.Write(newCSVRows(metrics, src).append(nil, &res))
	}
	for i, s := range res.Sets {
		if s.Err != nil {
			fmt.Fprintf(os.Stderr, "pcp-exporter fetch: %s: %v\n", metrics[i].Name, s.Err)
		}
	}
	return bw.Flush()
}

// selectedSource restricts a source's metrics to those fetch selected.
type selectedSource struct {
	source.Source
	metrics []source.Metric
}

func (s selectedSource) Metrics() []source.Metric { return s.metrics }

// Unwrap returns the source the metrics were selected from: its
// capabilities (the generations of an MMV source, for _created) are the
// selection's.
func (s selectedSource) Unwrap() source.Source { return s.Source }

// fetchOpenMetrics fetches the selected metrics once and writes them as the
// OpenMetrics exposition serve gives for the source (mapped families, no
// self-metrics), ended by # EOF.
func fetchOpenMetrics(w io.Writer, src source.Source, name string, args []string, mapper *mapping.Mapper, created bool, logger *slog.Logger, context []mapping.LabelPair) error {
	metrics, err := selectMetrics(src.Metrics(), args)
	if err != nil {
		return err
	}
	col := bridge.New(mapper, logger, bridge.Source{Name: name, Src: selectedSource{src, metrics}, Context: context})
	bw := bufio.NewWriter(w)
	if err := col.WriteOpenMetrics(bw, created); err != nil {
		return fmt.Errorf("openmetrics: %w", err)
	}
	if _, err := bw.WriteString("# EOF\n"); err != nil {
		return err
	}
	return bw.Flush()
}

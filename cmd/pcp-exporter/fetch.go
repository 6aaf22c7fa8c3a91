package main

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/pcp-exporter/pcp-exporter/bridge"
	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/pmcd"
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
				var src source.Source
				var err error
				name := mf.path
				switch {
				case (mf.path == "") == (len(pf.specs) == 0):
					return usagef("name one source: --mmv or --pmcd")
				case mf.path != "":
					src, err = openMMV(mf.path, mf.pidCheck, logger)
				default:
					var p *pmcd.Source
					p, err = pf.openOne(nil)
					if err == nil {
						src, name = p, "pmcd "+p.Endpoint().String()
					}
				}
				if err != nil {
					return err
				}
				defer src.Close()
				if src, err = dflags.wrap(src, logger); err != nil {
					return err
				}
				if mapper != nil {
					src = mapper.Wrap(src) // the node naming's families
					var context []mapping.LabelPair
					if mf.path != "" {
						context = mmvContext() // pmcd names its host itself
					}
					err = fetchOpenMetrics(os.Stdout, src, name, *names, mapper, *created, logger, context)
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

// sortedValues puts the values of a set in instance id order, in place
// (an archive replay lists them in libpcp's order, see archive.Replay).
func sortedValues(vals []source.InstValue) []source.InstValue {
	for i := 1; i < len(vals); i++ {
		if vals[i].Inst < vals[i-1].Inst {
			slices.SortStableFunc(vals, func(a, b source.InstValue) int { return cmp.Compare(a.Inst, b.Inst) })
			break
		}
	}
	return vals
}

const csvHeader = "time,metric,instance_id,instance,value\n"

// csvRows writes results as the CLI contract's CSV rows (no header): one
// row per value, time,metric,instance_id,instance,value, instances in id
// order with the names in force at the result's time, fields quoted as RFC
// 4180 says (string values always). The metric and instance fields are
// escaped once per name.
type csvRows struct {
	metrics []source.Metric
	insts   *source.InstanceNames
	names   [][]byte     // per metric: its field
	hints   [][]instHint // per metric and value position
	ts      []byte
}

// instHint is the instance last seen at a value position: sets list their
// instances in the same order time after time.
type instHint struct {
	inst int32
	gen  uint64 // of the instance names it was made with
	ok   bool
	// mid is the row's middle: ",metric,instance_id,instance,"
	mid []byte
}

func newCSVRows(metrics []source.Metric, src interface {
	Instances(semantics.InDom) []source.Instance
}) *csvRows {
	c := &csvRows{metrics: metrics, insts: source.NewInstanceNames(src), hints: make([][]instHint, len(metrics))}
	for _, m := range metrics {
		c.names = append(c.names, appendCSVField(nil, m.Name, false))
	}
	return c
}

// append writes the rows of one result.
func (c *csvRows) append(b []byte, res *source.Result) []byte {
	c.ts = semantics.AppendTime(c.ts[:0], res.Time)
	for i, s := range res.Sets {
		if s.Err != nil {
			continue
		}
		indom := c.metrics[i].Desc.InDom
		var gen uint64
		if indom != semantics.InDomNull && len(s.Values) > 0 {
			gen = c.insts.Gen(indom, res.Time)
		}
		vals := sortedValues(s.Values)
		if len(c.hints[i]) < len(vals) {
			c.hints[i] = append(c.hints[i], make([]instHint, len(vals)-len(c.hints[i]))...)
		}
		for j, v := range vals {
			b = append(b, c.ts...)
			h := &c.hints[i][j]
			if !h.ok || h.inst != v.Inst || h.gen != gen {
				mid := append(append([]byte{','}, c.names[i]...), ',')
				if indom != semantics.InDomNull {
					mid = strconv.AppendInt(mid, int64(v.Inst), 10)
					mid = append(mid, ',')
					if in, ok := c.insts.Lookup(indom, v.Inst, res.Time); ok {
						mid = appendCSVField(mid, in.Name, false)
					}
				} else {
					mid = append(mid, ',')
				}
				*h = instHint{inst: v.Inst, gen: gen, ok: true, mid: append(mid, ',')}
			}
			b = append(b, h.mid...)
			if v.Value.Type() == semantics.TypeString {
				b = appendCSVField(b, string(v.Value.Bytes()), true)
			} else {
				b = semantics.AppendText(b, v.Value)
			}
			b = append(b, '\n')
		}
	}
	return b
}

// appendCSVField appends s as an RFC 4180 field, quoted when force is set
// or when s holds a comma, a quote, a line break or leading space.
func appendCSVField(b []byte, s string, force bool) []byte {
	if !force && !strings.ContainsAny(s, ",\"\r\n") && (s == "" || (s[0] != ' ' && s[0] != '\t')) {
		return append(b, s...)
	}
	b = append(b, '"')
	b = append(b, strings.ReplaceAll(s, `"`, `""`)...)
	return append(b, '"')
}

// jsonLines writes values as the CLI contract's JSON lines (dump, fetch and
// replay): one object per record or fetch,
// {"time","metrics":[{"pmid","name","values":[{"inst","value"}]}]}, with
// "error" instead of "values" for a metric whose fetch failed. Metric names
// are escaped once, on first use.
type jsonLines struct {
	name func(i int, p semantics.PMID) string // of set i
	// records: dump's archive records, with a "mark" field after "time"
	// and values in record order (else in instance id order)
	records bool
	names   map[semantics.PMID][]byte
}

// newJSONLines writes the answers of fetches of metrics (fetch, replay).
func newJSONLines(metrics []source.Metric) *jsonLines {
	return &jsonLines{name: func(i int, _ semantics.PMID) string { return metrics[i].Name }, names: map[semantics.PMID][]byte{}}
}

// append writes the line of one record or answer.
func (j *jsonLines) append(b []byte, t time.Time, mark bool, sets []source.ValueSet) []byte {
	b = append(b, `{"time":"`...)
	b = semantics.AppendTime(b, t)
	b = append(b, '"')
	if j.records {
		b = append(b, `,"mark":`...)
		b = strconv.AppendBool(b, mark)
	}
	b = append(b, `,"metrics":[`...)
	for i, s := range sets {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"pmid":"`...)
		b = appendPMID(b, s.PMID)
		b = append(b, `","name":`...)
		n, ok := j.names[s.PMID]
		if !ok {
			n = semantics.AppendJSONString(nil, j.name(i, s.PMID))
			j.names[s.PMID] = n
		}
		b = append(b, n...)
		if s.Err != nil {
			b = append(b, `,"error":`...)
			b = semantics.AppendJSONString(b, s.Err.Error())
			b = append(b, '}')
			continue
		}
		b = append(b, `,"values":[`...)
		vals := s.Values
		if !j.records {
			vals = sortedValues(vals)
		}
		for k, v := range vals {
			if k > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"inst":`...)
			if v.Inst == semantics.InNull {
				b = append(b, "null"...)
			} else {
				b = strconv.AppendInt(b, int64(v.Inst), 10)
			}
			b = append(b, `,"value":`...)
			b = semantics.AppendJSON(b, v.Value)
			b = append(b, '}')
		}
		b = append(b, "]}"...)
	}
	return append(b, "]}\n"...)
}

// appendPMID appends a PMID as domain.cluster.item.
func appendPMID(b []byte, p semantics.PMID) []byte {
	b = strconv.AppendUint(b, uint64(p.Domain()), 10)
	b = append(b, '.')
	b = strconv.AppendUint(b, uint64(p.Cluster()), 10)
	b = append(b, '.')
	return strconv.AppendUint(b, uint64(p.Item()), 10)
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

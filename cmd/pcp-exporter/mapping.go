package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/alecthomas/kingpin/v2"

	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/archive"
)

// fullLabelsFlag adds --mapping.full-labels to a command.
func fullLabelsFlag(cmd *kingpin.CmdClause, v *bool) {
	cmd.Flag("mapping.full-labels", "Every PCP label on every series and no target_info, as before lean labels (the mapping file's full_labels).").BoolVar(v)
}

// mappingFlags are the flags of the mapping command.
type mappingFlags struct {
	mmv         *mmvFlags
	archives    []string
	mappingFile string
	naming      string
	fullLabels  bool
	format      string
	derived     *derivedFlags
	metrics     []string
}

func mappingCommand() command {
	return command{
		name: "mapping",
		help: "Print how each PCP metric of a source maps: Prometheus family, type, unit, scale and labels; OpenTelemetry instrument, kind, unit and attributes.",
		setup: func(cmd *kingpin.CmdClause) func() error {
			f := &mappingFlags{mmv: addMMVFlags(cmd, false)}
			cmd.Flag("archive", "PCP archive (repeatable, as for serve) instead of --mmv.").PlaceHolder("PATH").StringsVar(&f.archives)
			cmd.Flag("mapping.config", "Mapping configuration file (as for serve).").PlaceHolder("FILE").StringVar(&f.mappingFile)
			cmd.Flag("naming", "Naming: default or pmproxy (as for serve).").Default("default").EnumVar(&f.naming, "default", "pmproxy")
			fullLabelsFlag(cmd, &f.fullLabels)
			cmd.Flag("format", "Output format: table or json.").Default("table").EnumVar(&f.format, "table", "json")
			f.derived = addDerivedFlags(cmd)
			cmd.Arg("metric", "Metrics or subtrees (all when none is given).").StringsVar(&f.metrics)
			return func() error { return runMapping(os.Stdout, f) }
		},
	}
}

func runMapping(w io.Writer, f *mappingFlags) error {
	if (f.mmv.path == "") == (len(f.archives) == 0) {
		return usagef("give either --mmv or --archive")
	}
	mapper, err := newMapper(f.mappingFile, f.naming, f.fullLabels)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var src source.Source
	var context []mapping.LabelPair
	if f.mmv.path != "" {
		if src, err = openMMV(f.mmv.path, f.mmv.pidCheck, logger); err != nil {
			return err
		}
		context = mmvContext()
	} else {
		as, err := archive.OpenAll(f.archives)
		if err != nil {
			return err
		}
		rp, err := archive.NewReplay(as, archive.ReplayOptions{})
		if err != nil {
			return err
		}
		src = rp
	}
	defer src.Close()
	if src, err = f.derived.wrap(src, logger); err != nil {
		return err
	}
	m, err := describeMapping(src, context, f.metrics, mapper)
	if err != nil {
		return err
	}
	if f.format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(m)
	}
	return m.writeTable(w)
}

// mappingDoc is what the mapping command prints.
type mappingDoc struct {
	// TargetInfo are target_info's labels (lean labels), Resource the
	// OpenTelemetry resource attributes.
	TargetInfo map[string]string `json:"target_info,omitempty"`
	Resource   map[string]string `json:"resource"`
	Metrics    []metricMapping   `json:"metrics"`
}

type metricMapping struct {
	PCP        string       `json:"pcp"`
	Skipped    string       `json:"skipped,omitempty"` // the reason
	Prometheus *promMapping `json:"prometheus,omitempty"`
	OTel       *otelMapping `json:"otel,omitempty"`
}

type promMapping struct {
	Family   string   `json:"family"`    // the samples' name (text format)
	OMFamily string   `json:"om_family"` // the OpenMetrics family name
	Type     string   `json:"type"`
	Unit     string   `json:"unit,omitempty"`
	Scale    float64  `json:"scale"`
	Labels   []string `json:"labels"`
	// LeftOut are the PCP labels of the metric and its instances neither
	// on the series nor in target_info (lean labels: indom, cluster and
	// item labels, an instance label repeating instname).
	LeftOut []string `json:"left_out,omitempty"`
}

type otelMapping struct {
	Name       string   `json:"name"`
	Kind       string   `json:"kind"`
	Unit       string   `json:"unit"`
	Scale      float64  `json:"scale"`
	Attributes []string `json:"attributes"`
}

// describeMapping maps a source's metrics (those args select) as serve
// would, with the label names their instances give.
func describeMapping(src source.Source, context []mapping.LabelPair, args []string, mapper *mapping.Mapper) (*mappingDoc, error) {
	all := src.Metrics()
	selected, err := selectMetrics(all, args)
	if err != nil {
		return nil, err
	}
	target := mapper.TargetLabels(all, context)
	fams, skipped := mapper.MapSource(all, target, nil)
	doc := &mappingDoc{Resource: pairMap(mapping.Resource(all, target))}
	if mapper.Lean() {
		doc.TargetInfo = pairMap(target)
	}
	byName := map[string]*mapping.Family{}
	for i := range fams {
		byName[fams[i].PCPName] = &fams[i]
	}
	why := map[string]mapping.SkipReason{}
	for _, s := range skipped {
		why[s.PCPName] = s.Reason
	}
	for i := range selected {
		md := &selected[i]
		mm := metricMapping{PCP: md.Name}
		f := byName[md.Name]
		if f == nil {
			mm.Skipped = string(why[md.Name])
		} else {
			var insts []source.Instance
			if md.Desc.InDom != semantics.InDomNull {
				insts = src.Instances(md.Desc.InDom)
			}
			labels := labelNames(f, insts)
			mm.Prometheus = &promMapping{Family: f.Name, OMFamily: f.OMName, Type: f.Type.String(), Unit: f.Unit, Scale: f.Scale, Labels: labels,
				LeftOut: leftOut(md, insts, labels, f.Target())}
			if f.Type == mapping.Info {
				mm.Prometheus.Labels = sortedAppend(labels, mapping.InfoValueLabel)
			}
		}
		if in, skip := mapper.Instrument(md); skip == "" {
			var insts []source.Instance
			if md.Desc.InDom != semantics.InDomNull {
				insts = src.Instances(md.Desc.InDom)
			}
			kind := "gauge"
			if in.Kind == mapping.KindSum {
				kind = "sum"
			}
			mm.OTel = &otelMapping{Name: in.Name, Kind: kind, Unit: in.Unit, Scale: in.Scale, Attributes: attrNames(&in, insts)}
			if in.String {
				mm.OTel.Attributes = sortedAppend(mm.OTel.Attributes, mapping.InfoValueLabel)
			}
		}
		doc.Metrics = append(doc.Metrics, mm)
	}
	return doc, nil
}

// labelNames returns the names of the labels the family's series carry
// (over its instances, or the singular series).
func labelNames(f *mapping.Family, insts []source.Instance) []string {
	ls := map[string]bool{}
	if f.Desc.InDom == semantics.InDomNull {
		for _, p := range f.Labels(nil) {
			ls[p.Name] = true
		}
	}
	for i := range insts {
		for _, p := range f.Labels(&insts[i]) {
			ls[p.Name] = true
		}
	}
	return keys(ls)
}

// leftOut returns the sanitized names of the PCP labels of a metric and its
// instances that are neither series labels nor target labels.
func leftOut(md *source.Metric, insts []source.Instance, labels []string, target []mapping.LabelPair) []string {
	shown := map[string]bool{}
	for _, l := range labels {
		shown[l] = true
	}
	for _, p := range target {
		shown[p.Name] = true
	}
	out := map[string]bool{}
	add := func(ls semantics.LabelSet) {
		for _, l := range ls {
			if n := mapping.SanitizeLabelName(l.Name); !shown[n] {
				out[n] = true
			}
		}
	}
	add(md.Labels)
	for i := range insts {
		add(insts[i].Labels)
	}
	return keys(out)
}

// attrNames returns the names of an instrument's data-point attributes
// over its instances.
func attrNames(in *mapping.Instrument, insts []source.Instance) []string {
	as := map[string]bool{}
	if len(insts) == 0 {
		for _, p := range in.Attributes(nil) {
			as[p.Name] = true
		}
	}
	for i := range insts {
		for _, p := range in.Attributes(&insts[i]) {
			as[p.Name] = true
		}
	}
	return keys(as)
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortedAppend(s []string, v string) []string {
	s = append(s, v)
	sort.Strings(s)
	return s
}

func pairMap(ps []mapping.LabelPair) map[string]string {
	m := make(map[string]string, len(ps))
	for _, p := range ps {
		m[p.Name] = p.Value
	}
	return m
}

// writeTable prints the mapping as an aligned table, the target labels and
// resource first.
func (d *mappingDoc) writeTable(w io.Writer) error {
	pairs := func(m map[string]string) string {
		var s []string
		for _, k := range keys(m) {
			s = append(s, k+"="+strconv.Quote(m[k]))
		}
		return "{" + strings.Join(s, ", ") + "}"
	}
	if d.TargetInfo != nil {
		fmt.Fprintf(w, "target_info %s\n", pairs(d.TargetInfo))
	}
	fmt.Fprintf(w, "OTel resource %s\n\n", pairs(d.Resource))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PCP METRIC\tPROMETHEUS FAMILY\tTYPE\tUNIT\tSCALE\tLABELS\tOTEL INSTRUMENT\tKIND\tOTEL UNIT\tATTRIBUTES")
	list := func(s []string) string {
		if len(s) == 0 {
			return "-"
		}
		return strings.Join(s, ",")
	}
	for _, m := range d.Metrics {
		prom := "-\t-\t-\t-\t-"
		if m.Prometheus != nil {
			p := m.Prometheus
			unit := p.Unit
			if unit == "" {
				unit = "-"
			}
			prom = fmt.Sprintf("%s\t%s\t%s\t%s\t%s", p.Family, p.Type, unit, strconv.FormatFloat(p.Scale, 'g', -1, 64), list(p.Labels))
		} else {
			prom = "(skipped: " + m.Skipped + ")\t-\t-\t-\t-"
		}
		otel := "-\t-\t-\t-"
		if m.OTel != nil {
			otel = fmt.Sprintf("%s\t%s\t%s\t%s", m.OTel.Name, m.OTel.Kind, m.OTel.Unit, list(m.OTel.Attributes))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", m.PCP, prom, otel)
	}
	return tw.Flush()
}

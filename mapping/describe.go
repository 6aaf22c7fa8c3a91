package mapping

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// Description is how a source's metrics map, as the mapping command
// prints it: as JSON, or as a table by WriteTable.
type Description struct {
	// TargetInfo are target_info's labels (lean labels), Resource the
	// OpenTelemetry resource attributes.
	TargetInfo map[string]string   `json:"target_info,omitempty"`
	Resource   map[string]string   `json:"resource"`
	Metrics    []MetricDescription `json:"metrics"`
	// DefaultOff is what the lean default and the secret rule leave out
	// (every entry, with the count of the source's metrics it leaves out).
	DefaultOff []DefaultOffDescription `json:"default_off"`
}

// MetricDescription is one PCP metric's Prometheus family and
// OpenTelemetry instrument; Skipped says why it has no family.
type MetricDescription struct {
	PCP        string           `json:"pcp"`
	Skipped    string           `json:"skipped,omitempty"` // the reason
	Prometheus *PromDescription `json:"prometheus,omitempty"`
	OTel       *OTelDescription `json:"otel,omitempty"`
}

// PromDescription is a metric's Prometheus family: names, type, unit,
// the scale applied to values and the names of its series' labels.
type PromDescription struct {
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

// OTelDescription is a metric's OpenTelemetry instrument: name, kind
// (gauge or sum), UCUM unit, scale and data-point attribute names.
type OTelDescription struct {
	Name string `json:"name"`
	// Kind is "gauge" or "sum" (monotonic), "updown_sum" for a
	// non-monotonic one (a hostmetrics naming's usage metric).
	Kind string `json:"kind"`
	// Int is set for whole-number values (the hostmetrics naming's
	// value_type int).
	Int        bool     `json:"int,omitempty"`
	Unit       string   `json:"unit"`
	Scale      float64  `json:"scale"`
	Attributes []string `json:"attributes"`
}

// Describe maps the selected metrics of src (some or all of
// src.Metrics()) as the exporter does, with target labels from all of
// them and context, and the label names their instances give.
func Describe(src source.Source, context []LabelPair, selected []source.Metric, mapper *Mapper) *Description {
	all := src.Metrics()
	target := mapper.TargetLabels(all, context)
	fams, skipped := mapper.MapSource(all, target, nil)
	doc := &Description{Resource: pairMap(mapper.Resource(all, target))}
	if mapper.Lean() {
		doc.TargetInfo = pairMap(target)
	}
	byName := map[string]*Family{}
	for i := range fams {
		byName[fams[i].PCPName] = &fams[i]
	}
	why := map[string]SkipReason{}
	for _, s := range skipped {
		why[s.PCPName] = s.Reason
	}
	for i := range selected {
		md := &selected[i]
		mm := MetricDescription{PCP: md.Name}
		f := byName[md.Name]
		if f == nil {
			mm.Skipped = string(why[md.Name])
		} else {
			var insts []source.Instance
			if md.Desc.InDom != semantics.InDomNull {
				insts = src.Instances(md.Desc.InDom)
			}
			labels := labelNames(f, insts)
			mm.Prometheus = &PromDescription{Family: f.Name, OMFamily: f.OMName, Type: f.Type.String(), Unit: f.Unit, Scale: f.Scale, Labels: labels,
				LeftOut: leftOut(md, insts, labels, f.Target())}
			if f.Type == Info {
				mm.Prometheus.Labels = sortedAppend(labels, InfoValueLabel)
			}
		}
		if in, skip := mapper.Instrument(md); skip == "" {
			var insts []source.Instance
			if md.Desc.InDom != semantics.InDomNull {
				insts = src.Instances(md.Desc.InDom)
			}
			kind := "gauge"
			if in.Kind == KindSum {
				kind = "sum"
				if !in.Monotonic {
					kind = "updown_sum"
				}
			}
			mm.OTel = &OTelDescription{Name: in.Name, Kind: kind, Int: in.Int, Unit: in.Unit, Scale: in.Scale, Attributes: attrNames(&in, insts)}
			if in.String {
				mm.OTel.Attributes = sortedAppend(mm.OTel.Attributes, InfoValueLabel)
			}
		}
		doc.Metrics = append(doc.Metrics, mm)
	}
	doc.DefaultOff = describeDefaultOff(all, why)
	return doc
}

// labelNames returns the names of the labels the family's series carry
// (over its instances, or the singular series).
func labelNames(f *Family, insts []source.Instance) []string {
	ls := map[string]bool{}
	for _, n := range f.nodeLabelNames() { // known before a fetch names its series
		ls[n] = true
	}
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
func leftOut(md *source.Metric, insts []source.Instance, labels []string, target []LabelPair) []string {
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
			if n := SanitizeLabelName(l.Name); !shown[n] {
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
func attrNames(in *Instrument, insts []source.Instance) []string {
	as := map[string]bool{}
	for _, n := range in.fam.nodeLabelNames() {
		as[n] = true
	}
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

func pairMap(ps []LabelPair) map[string]string {
	m := make(map[string]string, len(ps))
	for _, p := range ps {
		m[p.Name] = p.Value
	}
	return m
}

// WriteTable prints the mapping as an aligned table, the target labels and
// resource first.
func (d *Description) WriteTable(w io.Writer) error {
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
	if err := tw.Flush(); err != nil {
		return err
	}
	return d.writeDefaultOff(w)
}

package mapping

import (
	"strings"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// InstrumentKind is the OpenTelemetry data type of a mapped metric.
type InstrumentKind int

// OpenTelemetry kinds: PCP COUNTER is a monotonic cumulative Sum, INSTANT and
// DISCRETE are Gauges.
const (
	KindGauge InstrumentKind = iota
	KindSum
)

// Instrument is the OpenTelemetry form of one PCP metric.
type Instrument struct {
	// Name is PCP's dotted name (or the rename of the configuration).
	Name string
	// Unit is the UCUM unit of the converted values ("By", "s", "By/s",
	// "{count}", "1").
	Unit        string
	Description string
	Kind        InstrumentKind
	// Monotonic is set for PCP counters (a cumulative, monotonic Sum); a
	// hostmetrics metric may be a non-monotonic Sum (system.memory.usage).
	Monotonic bool
	// Int is set for a hostmetrics metric of value_type int: its values
	// are whole numbers, sent as such.
	Int bool
	// Scale converts PCP values to Unit.
	Scale float64
	// String marks a STRING metric: its value goes to an attribute of a gauge
	// of 1, as the Prometheus side's _info metric.
	String bool
	fam    *Family
}

// OTel returns the mapper whose families the OpenTelemetry outputs (the
// live push and the OTLP backfill alike) carry: the same selection, renames
// and labels, with the naming OpenTelemetry uses for this one (the node
// naming's families stay; the pmproxy naming's raw values and bare names
// are a Prometheus form, so OpenTelemetry gets the default's converted
// values and UCUM units, and STRING metrics as info gauges).
func (m *Mapper) OTel() *Mapper {
	if m.naming == NamingDefault || m.naming.Computed() {
		return m
	}
	n := *m
	n.naming = NamingDefault
	return &n
}

// Instrument maps a metric to an OpenTelemetry instrument, with the same
// selection, renames and skip reasons as Map under OTel's naming (STRING
// metrics are kept as String instruments under every naming).
func (m *Mapper) Instrument(md *source.Metric) (Instrument, SkipReason) {
	f, why := m.OTel().Map(md)
	if why != "" {
		return Instrument{}, why
	}
	return f.Instrument(), ""
}

// Instrument returns the OpenTelemetry instrument of a family mapped by
// an OTel mapper (Mapper.OTel): its name is OTelName, its values
// OTelValue's.
func (f *Family) Instrument() Instrument {
	in := Instrument{Name: f.OTelName, Unit: f.UCUM, Description: f.Help, Scale: f.Scale, fam: f}
	if o := f.prof; o != nil && o.otel != nil {
		in.Name, in.Unit = o.name, o.otel.unit
		in.Kind, in.Monotonic, in.Int = KindGauge, o.otel.monotonic, o.otel.integer
		if o.otel.sum {
			in.Kind = KindSum
		}
		return in
	}
	switch f.Type {
	case Counter:
		in.Kind, in.Monotonic = KindSum, true
	case Info:
		in.String = true
		in.Unit = "1"
	}
	return in
}

// OTelValue returns a numeric value in the instrument's unit: Float64, the
// one conversion every output shares.
func (f *Family) OTelValue(v semantics.Value) float64 { return f.Float64(v) }

// OTelKind is the OpenTelemetry kind of f's instrument (Instrument's
// Kind and Monotonic), for an output that encodes families (the OTLP
// backfill): a counter is a monotonic Sum, a hostmetrics metric what its
// metadata.yaml says, anything else a Gauge.
func (f *Family) OTelKind() (kind InstrumentKind, monotonic bool) {
	if o := f.prof; o != nil && o.otel != nil {
		if o.otel.sum {
			return KindSum, o.otel.monotonic
		}
		return KindGauge, false
	}
	if f.Type == Counter {
		return KindSum, true
	}
	return KindGauge, false
}

// OTelInt reports whether f's instrument has whole-number values
// (Instrument's Int: a hostmetrics metric of value_type int).
func (f *Family) OTelInt() bool { return f.prof != nil && f.prof.otel != nil && f.prof.otel.integer }

// Attributes returns the data-point attributes of one series of the
// instrument: its lean labels without the target labels, which go to the
// resource (see Resource), whatever full_labels says. inst is nil for a
// singular metric. A STRING metric's value attribute is not included.
func (in *Instrument) Attributes(inst *source.Instance) []LabelPair {
	return in.fam.Attributes(inst)
}

// Attributes returns the OpenTelemetry data-point attributes of one series
// of f (see Instrument.Attributes): live pushes and OTLP backfills give the
// same ones.
func (f *Family) Attributes(inst *source.Instance) []LabelPair {
	return f.leanLabels(inst, false)
}

// Resource returns the OpenTelemetry resource attributes of a source whose
// target labels (TargetLabels) are target, after OpenTelemetry's semantic
// conventions: hostname is host.name, machineid host.id; the other target
// labels keep their names under the prefix "pcp." (pcp.domainname,
// pcp.agent); service.name is the MMV application when every metric is one
// MMV file's (mmv.<file>.*), else "pcp"; service.instance.id is the host
// name when known. Sorted by name.
func Resource(metrics []source.Metric, target []LabelPair) []LabelPair {
	var s labelSet
	for _, p := range target {
		switch p.Name {
		case "hostname":
			s.set("host.name", p.Value)
			s.set("service.instance.id", p.Value)
		case "machineid":
			s.set("host.id", p.Value)
		default:
			s.set("pcp."+p.Name, p.Value)
		}
	}
	s.set("service.name", serviceName(metrics))
	return s.sorted()
}

// serviceName is the MMV file all metrics come from (mmv.<file>.<metric>),
// else "pcp".
func serviceName(metrics []source.Metric) string {
	app := ""
	for i := range metrics {
		rest, ok := strings.CutPrefix(metrics[i].Name, "mmv.")
		file, _, dot := strings.Cut(rest, ".")
		if !ok || !dot || (app != "" && file != app) {
			return "pcp"
		}
		app = file
	}
	if app == "" {
		return "pcp"
	}
	return app
}

// Resource is the package's Resource under the mapper's naming: the
// hostmetrics naming adds os.type "linux" when the metrics hold one of its
// families or their PCP sources (only the linux agent gives those), as the
// collector's resource detection would on the host.
func (m *Mapper) Resource(metrics []source.Metric, target []LabelPair) []LabelPair {
	r := Resource(metrics, target)
	if m.naming != NamingHostmetrics {
		return r
	}
	for i := range metrics {
		if hostProfile.familyOf(&metrics[i]) != nil || hostSources[metrics[i].Name] {
			s := labelSet{}
			for _, p := range r {
				s.set(p.Name, p.Value)
			}
			s.set("os.type", "linux")
			return s.sorted()
		}
	}
	return r
}

package mapping

import (
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
	// Monotonic is set for PCP counters (a cumulative, monotonic Sum).
	Monotonic bool
	// Scale converts PCP values to Unit.
	Scale float64
	// String marks a STRING metric: its value goes to an attribute of a gauge
	// of 1, as the Prometheus side's _info metric.
	String bool
}

// Instrument maps a metric to an OpenTelemetry instrument, with the same
// selection, renames and skip reasons as Map (STRING metrics are kept as
// String instruments under both namings).
func (m *Mapper) Instrument(md *source.Metric) (Instrument, SkipReason) {
	n := *m
	n.naming = NamingDefault
	f, why := n.Map(md)
	if why != "" {
		return Instrument{}, why
	}
	name, _ := m.baseName(md.Name)
	in := Instrument{Name: name, Unit: f.UCUM, Description: f.Help, Scale: f.Scale}
	switch f.Type {
	case Counter:
		in.Kind, in.Monotonic = KindSum, true
	case Info:
		in.String = true
		in.Unit = "1"
	}
	return in, ""
}

// resourceNames renames PCP context labels to OpenTelemetry resource
// attributes (semantic conventions host.*).
var resourceNames = map[string]string{
	"hostname":  "host.name",
	"machineid": "host.id",
}

// Attributes splits the labels of one series for OpenTelemetry: PCP context
// labels (hostname, machineid, domainname, userid, ...) describe the source
// and go to the resource (hostname as host.name, machineid as host.id);
// domain, indom, cluster, item and instance labels, plus instname and instid
// for an instance, are data-point attributes. Compound labels are flattened
// to dotted names. inst is nil for a singular metric.
func Attributes(md *source.Metric, inst *source.Instance) (resource, attrs []LabelPair) {
	for _, l := range md.Labels {
		if l.Flags&0x3f == semantics.LabelContext {
			for _, p := range flattenLabel(l.Name, l.Value, nil) {
				if r, ok := resourceNames[p.Name]; ok {
					p.Name = r
				}
				resource = append(resource, p)
			}
			continue
		}
		attrs = flattenLabel(l.Name, l.Value, attrs)
	}
	if inst != nil {
		var s labelSet
		s.pairs = attrs
		for _, p := range pcpPairs(inst.Labels, nil) {
			s.set(p.Name, p.Value)
		}
		s.set("instname", validUTF8(inst.Name))
		s.set("instid", instIDString(inst.ID))
		attrs = s.sorted()
	}
	return resource, attrs
}

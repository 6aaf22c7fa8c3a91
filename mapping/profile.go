package mapping

import (
	"strings"

	"github.com/pcp-exporter/pcp-exporter/source"
)

// A profile is a table of families that a NodeSource computes from their
// PCP sources, named verbatim by the mapper: the node naming's
// (node_exporter's families, node.go) and the hostmetrics naming's (the
// OpenTelemetry Collector hostmetrics receiver's metrics, hostmetrics.go).
type profile struct {
	fams   []nodeFamily
	index  map[string]int
	origin string // what a family is, for its help text
}

func newProfile(fams []nodeFamily, origin string) *profile {
	p := &profile{fams: fams, index: make(map[string]int, len(fams)), origin: origin}
	for i, f := range fams {
		p.index[f.name] = i
	}
	return p
}

func (p *profile) names() []string {
	out := make([]string, len(p.fams))
	for i, f := range p.fams {
		out[i] = f.name
	}
	return out
}

// familyOf returns the table row of a metric a NodeSource of p made, or nil.
func (p *profile) familyOf(md *source.Metric) *nodeFamily {
	if p == nil || md.Desc.PMID.Domain() != NodeDomain {
		return nil
	}
	i, ok := p.index[md.Name]
	if !ok {
		return nil
	}
	return &p.fams[i]
}

// profile is the naming's table of computed families (nil: none).
func (n Naming) profile() *profile {
	switch n {
	case NamingNode:
		return nodeProfile
	case NamingHostmetrics:
		return hostProfile
	}
	return nil
}

// Computed reports whether the naming computes families from their PCP
// sources (node, hostmetrics): its outputs read the sources through
// Mapper.Wrap, at the times a replay gives (a backfill needs --step).
func (n Naming) Computed() bool { return n.profile() != nil }

// family is the Prometheus family of a NodeSource metric: the name as the
// table's, the values as NodeSource computed them.
func (nf *nodeFamily) family(f Family, md *source.Metric) Family {
	f.Type = nf.typ
	f.Name, f.OMName = nf.name, nf.name
	if nf.otel != nil {
		f.Name, f.OMName = nf.otel.promName, nf.otel.promName
		f.UCUM = nf.otel.unit
		f.Unit = omUnit(nf.otel.unit)
	}
	if nf.typ == Counter {
		f.OMName = strings.TrimSuffix(f.Name, "_total")
	}
	f.Help = md.OneLine
	f.node = true
	f.prof = nf
	f.labels = nil
	return f
}

// Wrap returns src as the mapper's naming reads it: with the node or
// hostmetrics naming a NodeSource of its table over it, else src without
// one (a reload may change the naming). Every output wraps its sources
// with it, so that one mapping serves them all.
func (m *Mapper) Wrap(src source.Source) source.Source {
	p := m.naming.profile()
	if p != nil && profileOf(src) == p {
		return src // already wrapped (by a command that selects from its names)
	}
	src = StripNode(src)
	if p != nil && src != nil {
		return newProfileSource(src, p)
	}
	return src
}

// profileOf returns the table of the NodeSource src is or wraps (nil:
// none).
func profileOf(src source.Source) *profile {
	for src != nil {
		if n, ok := src.(*NodeSource); ok {
			return n.p
		}
		w, ok := src.(source.Wrapper)
		if !ok {
			return nil
		}
		src = w.Unwrap()
	}
	return nil
}

// StripNode returns the source a NodeSource wraps, or src.
func StripNode(src source.Source) source.Source {
	if n, ok := src.(*NodeSource); ok {
		return n.src
	}
	return src
}

// nodeLabelNames are the label names of a profile family's series (none
// for another family).
func (f *Family) nodeLabelNames() []string {
	if f.prof == nil {
		return nil
	}
	var out []string
	for _, p := range f.prof.parts {
		if p.label != "" {
			out = append(out, p.label)
		}
		for _, c := range p.consts {
			out = append(out, c.Name)
		}
		for _, j := range p.joins {
			out = append(out, j.label)
		}
	}
	return out
}

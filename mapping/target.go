package mapping

import (
	"sort"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// Lean labels. With the default naming a series carries only what tells it
// apart within its target: the instance (instname), the instance's own PCP
// labels (less one that repeats the instance name), and the target labels
// whose values differ between the sources of one output (several hosts keep
// hostname). What is the same on every series of a source goes once into
// the target's labels (target_info in Prometheus, the resource in
// OpenTelemetry): PCP's context labels (hostname, machineid, domainname,
// userid, groupid) and the domain labels with one value over the source
// (agent). Indom, cluster and item labels (indom_name, device_type) say
// nothing a series' name does not: they are left out unless named in
// series_labels. full_labels (or Options.FullLabels) restores every PCP
// label on every series, without target_info.

// TargetInfoName is the name of the info metric that carries the target
// labels, as Prometheus and OpenTelemetry agree.
const TargetInfoName = "target_info"

// TargetInfoHelp is target_info's HELP text.
const TargetInfoHelp = "Target metadata: the PCP context labels of the source."

// TargetInfo returns target_info's family: an info metric (a gauge of 1 in
// the text format) whose labels are a source's TargetLabels.
func TargetInfo() *Family {
	return &Family{PCPName: TargetInfoName, Name: TargetInfoName, OMName: "target", Type: Info, Help: TargetInfoHelp, Scale: 1, integer: true}
}

// Lean reports whether series carry lean labels (the default naming without
// full_labels): then the target labels go into target_info.
func (m *Mapper) Lean() bool {
	return (m.naming == NamingDefault || m.naming.Computed()) && !m.full
}

// TargetLabels returns the labels that describe a source as a whole, sorted
// and sanitized as series labels are: its metrics' context labels, extra
// below them (the context a source lacks: the exporter's hostname for live
// MMV files) and the mapper's ExtraLabels, and each domain label whose
// value is the same on every metric that has it. The configuration's drop_labels and keep_labels apply.
func (m *Mapper) TargetLabels(metrics []source.Metric, extra []LabelPair) []LabelPair {
	t, _ := m.SourceTarget(metrics, extra)
	return t
}

// SourceTarget is TargetLabels, and the names of the labels among them
// that come from domain labels: they describe the source's metrics (the
// agent serving them all), not its host, and come and go with the
// metrics (an MMV directory's first file brings agent="mmv").
func (m *Mapper) SourceTarget(metrics []source.Metric, extra []LabelPair) (target []LabelPair, domainNames []string) {
	var s labelSet
	domain := map[string]string{}
	mixed := map[string]bool{}
	var order []string
	for i := range metrics {
		for _, l := range metrics[i].Labels {
			switch l.Flags & 0x3f {
			case semantics.LabelContext:
				for _, p := range flattenLabel(l.Name, l.Value, nil) {
					if n := targetLabelName(p.Name); !s.has(n) {
						s.set(n, p.Value) // the first metric's value
					}
				}
			case semantics.LabelDomain:
				for _, p := range flattenLabel(l.Name, l.Value, nil) {
					v, ok := domain[p.Name]
					switch {
					case !ok:
						domain[p.Name] = p.Value
						order = append(order, p.Name)
					case v != p.Value:
						mixed[p.Name] = true
					}
				}
			}
		}
	}
	for _, ps := range [][]LabelPair{extra, m.extra} {
		for _, p := range ps {
			if n := targetLabelName(p.Name); !s.has(n) {
				s.set(n, p.Value)
			}
		}
	}
	for _, n := range order {
		if !mixed[n] {
			s.set(targetLabelName(n), domain[n])
			domainNames = append(domainNames, targetLabelName(n))
		}
	}
	return m.filter(s.sorted()), domainNames
}

// targetLabelName sanitizes a label name; reserved names get the prefix pcp_.
func targetLabelName(n string) string {
	n = SanitizeLabelName(n)
	if reservedLabel(n, []string{"instname", "instid"}) {
		n = "pcp_" + n
	}
	return n
}

// filter applies keep_labels and drop_labels.
func (m *Mapper) filter(ls []LabelPair) []LabelPair {
	if m.keep == nil && m.drop == nil {
		return ls
	}
	kept := ls[:0]
	for _, p := range ls {
		if (m.keep == nil || m.keep[p.Name]) && !m.drop[p.Name] {
			kept = append(kept, p)
		}
	}
	return kept
}

// Distinct returns the target labels that series keep so that the sources
// of one output stay apart: of the labels whose values differ between
// targets (a label one target lacks differs), as few as tell every two
// targets apart, hostname and machineid first, then by name. Targets with
// the same hostname are one host: their series are one, whatever else
// differs (an older archive without machineid).
func Distinct(targets ...[]LabelPair) map[string]bool {
	d := map[string]bool{}
	if len(targets) < 2 {
		return d
	}
	value := func(t []LabelPair, n string) (string, bool) {
		for _, p := range t {
			if p.Name == n {
				return p.Value, true
			}
		}
		return "", false
	}
	differ := func(a, b []LabelPair, n string) bool {
		va, oka := value(a, n)
		vb, okb := value(b, n)
		return va != vb || oka != okb
	}
	var names []string
	seen := map[string]bool{}
	for _, t := range targets {
		for _, p := range t {
			if !seen[p.Name] {
				seen[p.Name] = true
				names = append(names, p.Name)
			}
		}
	}
	rank := func(n string) int {
		switch n {
		case "hostname":
			return 0
		case "machineid":
			return 1
		}
		return 2
	}
	sort.Slice(names, func(i, j int) bool {
		if rank(names[i]) != rank(names[j]) {
			return rank(names[i]) < rank(names[j])
		}
		return names[i] < names[j]
	})
	for i := range targets {
		for j := i + 1; j < len(targets); j++ {
			hi, iok := value(targets[i], "hostname")
			hj, jok := value(targets[j], "hostname")
			if iok && jok && hi == hj {
				continue // one host (daily archives, one with labels the other lacks)
			}
			apart := false
			for n := range d {
				if differ(targets[i], targets[j], n) {
					apart = true
					break
				}
			}
			for _, n := range names {
				if apart {
					break
				}
				if differ(targets[i], targets[j], n) {
					d[n], apart = true, true
				}
			}
		}
	}
	return d
}

// leanLabels are a series' labels with lean labels (see the comment at the
// top of this file); without the target labels that tell sources apart
// unless distinct.
func (f *Family) leanLabels(inst *source.Instance, distinct bool) []LabelPair {
	var s labelSet
	for _, p := range f.target {
		if distinct && f.distinct[p.Name] {
			s.set(p.Name, p.Value)
		}
	}
	own := []string{"instname", "instid"}
	if f.Type == Info {
		own = append(own, InfoValueLabel)
	}
	add := func(p LabelPair) {
		n := SanitizeLabelName(p.Name)
		if reservedLabel(n, own) {
			n = "pcp_" + n
		}
		s.set(n, p.Value)
	}
	for _, p := range f.labels {
		if f.m.series[SanitizeLabelName(p.Name)] {
			add(p)
		}
	}
	if inst != nil && f.node {
		for _, p := range pcpPairs(inst.Labels, nil) {
			s.set(p.Name, p.Value)
		}
		return f.m.filter(s.sorted())
	}
	if inst != nil {
		name := validUTF8(inst.Name)
		for _, p := range pcpPairs(inst.Labels, nil) {
			if p.Value != name || f.m.series[SanitizeLabelName(p.Name)] {
				add(p)
			}
		}
		s.set("instname", name)
		if f.m.cfg.InstID {
			s.set("instid", instIDString(inst.ID))
		}
	}
	return f.m.filter(s.sorted())
}

// Target returns the target labels of the family's source (nil when the
// family was mapped without them, or with full labels).
func (f *Family) Target() []LabelPair { return f.target }

// ContextPairs flattens a source's PCP context labels (source.ContextApart)
// into the extra labels of TargetLabels.
func ContextPairs(ls semantics.LabelSet) []LabelPair { return pcpPairs(ls, nil) }

// ContextOnTargetOnly reports whether the context labels of a source go
// only into its target labels (lean labels, no series_labels): then a
// source may keep them apart from its metrics (source.ContextApart).
func (m *Mapper) ContextOnTargetOnly() bool { return m.Lean() && len(m.series) == 0 }

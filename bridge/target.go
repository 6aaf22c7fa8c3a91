package bridge

import (
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pcp-exporter/pcp-exporter/mapping"
)

// targets returns target_info's series, in source order: one per target,
// none with full labels or the pmproxy naming, or when sel does not select
// target_info. Sources of one host (the same hostname: pmcd and the MMV
// directory beside it, the archives of one host) are one target, whose
// labels are theirs merged (the first source's value of a label wins), so
// that a join on target_info finds one series per host. A label that comes
// from one source's domain labels (agent="mmv" of the MMV directory) is
// left out of a merged target unless every source of the host has it
// with that value: it describes that source's metrics, not the host, and
// would change the host's target_info each time the directory's first
// file appears or its last goes.
func (c *Collector) targets(sel *Selection) [][]mapping.LabelPair {
	if !c.mapper.Lean() || !sel.Name(mapping.TargetInfoName) {
		return nil
	}
	ts := make([][]mapping.LabelPair, len(c.sources))
	domains := make([][]string, len(c.sources))
	for i, s := range c.sources {
		ts[i], domains[i] = s.target, s.domain
	}
	return mergeTargets(ts, domains)
}

// mergeTargets merges the target labels of sources of one host (see
// targets) and drops repeated and empty ones; domains[i] names the labels
// of ts[i] from domain labels (nil: none).
func mergeTargets(ts [][]mapping.LabelPair, domains [][]string) [][]mapping.LabelPair {
	var out [][]mapping.LabelPair
	var members [][]int // the sources of each target
next:
	for j, t := range ts {
		if len(t) == 0 {
			continue
		}
		h, ok := hostname(t)
		for i, o := range out {
			if slices.Equal(o, t) {
				members[i] = append(members[i], j)
				continue next
			}
			if oh, ook := hostname(o); ok && ook && oh == h {
				out[i] = mergeLabels(o, t)
				members[i] = append(members[i], j)
				continue next
			}
		}
		out = append(out, t)
		members = append(members, []int{j})
	}
	for i, m := range members {
		if len(m) < 2 {
			continue
		}
		out[i] = slices.DeleteFunc(out[i], func(p mapping.LabelPair) bool {
			perSource := false
			for _, j := range m {
				if j < len(domains) && slices.Contains(domains[j], p.Name) {
					perSource = true
				}
			}
			if !perSource {
				return false
			}
			for _, j := range m { // kept when every source has it so
				if !slices.Contains(ts[j], p) {
					return true
				}
			}
			return false
		})
	}
	return out
}

func hostname(t []mapping.LabelPair) (string, bool) {
	for _, p := range t {
		if p.Name == "hostname" {
			return p.Value, true
		}
	}
	return "", false
}

// mergeLabels returns the sorted union of two label sets, a's value
// winning.
func mergeLabels(a, b []mapping.LabelPair) []mapping.LabelPair {
	out := append([]mapping.LabelPair(nil), a...)
	for _, p := range b {
		if !slices.ContainsFunc(a, func(q mapping.LabelPair) bool { return q.Name == p.Name }) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(x, y mapping.LabelPair) int { return strings.Compare(x.Name, y.Name) })
	return out
}

// Targets returns the target labels of every source, as of the last read
// (target_info's series: the labels the same on every series of a source).
func (c *Collector) Targets() [][]mapping.LabelPair {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.targets(nil)
}

// appendTargets appends target_info, a series of value 1 per target: an
// info family in OpenMetrics (om), a gauge in the text format, which has
// no info type.
func appendTargets(b []byte, targets [][]mapping.LabelPair, om bool) []byte {
	f := mapping.Family{Name: mapping.TargetInfoName, OMName: strings.TrimSuffix(mapping.TargetInfoName, "_info"), Type: mapping.Info, Help: mapping.TargetInfoHelp}
	b = AppendHeader(b, &f, om)
	for _, t := range targets {
		b = append(b, mapping.TargetInfoName...)
		b = AppendLabels(b, t, "")
		b = AppendFloat(b, 1, om)
		b = append(b, '\n')
	}
	return b
}

// sendTargets sends target_info's series as const gauges.
func (c *Collector) sendTargets(ch chan<- prometheus.Metric, sel *Selection) {
	for _, t := range c.targets(sel) {
		names := make([]string, len(t))
		values := make([]string, len(t))
		for i, l := range t {
			names[i], values[i] = l.Name, l.Value
		}
		d := prometheus.NewDesc(mapping.TargetInfoName, mapping.TargetInfoHelp, names, nil)
		if m, err := prometheus.NewConstMetric(d, prometheus.GaugeValue, 1, values...); err == nil {
			ch <- m
		}
	}
}

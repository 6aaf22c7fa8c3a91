package bridge

import (
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pcp-exporter/pcp-exporter/mapping"
)

// targets returns the distinct target labels of the sources (target_info's
// series), in source order: none with full labels or the pmproxy naming,
// or when sel does not select target_info.
func (c *Collector) targets(sel *Selection) [][]mapping.LabelPair {
	if !c.mapper.Lean() || !sel.Name(mapping.TargetInfoName) {
		return nil
	}
	var out [][]mapping.LabelPair
next:
	for _, s := range c.sources {
		if len(s.target) == 0 {
			continue
		}
		for _, t := range out {
			if slices.Equal(t, s.target) {
				continue next
			}
		}
		out = append(out, s.target)
	}
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

package pmcd

import (
	"strings"

	"github.com/pcp-exporter/pcp-exporter/semantics"
)

// Selection chooses the metrics of pmcd to export: a name is selected when
// it matches an include pattern (or there is none) and no exclude pattern.
// A pattern follows semantics.MatchMetricName's rule: a metric name or
// subtree ("kernel.all" selects kernel.all.load and the rest of
// kernel.all), or a glob over the whole dotted name when it has any of
// *?[ ("*" crosses dots: "network.*.in.*").
type Selection struct {
	Include, Exclude []string
}

// ParseSelection builds a Selection from patterns, those starting with "-"
// excluding (as --pmcd.metrics=-proc).
func ParseSelection(patterns []string) (Selection, error) {
	var s Selection
	for _, p := range patterns {
		ex := strings.HasPrefix(p, "-")
		p = strings.TrimPrefix(p, "-")
		if err := semantics.CheckMetricPattern(p); err != nil {
			return Selection{}, err
		}
		if ex {
			s.Exclude = append(s.Exclude, p)
		} else {
			s.Include = append(s.Include, p)
		}
	}
	return s, nil
}

// Selected reports whether the selection exports name.
func (s Selection) Selected(name string) bool {
	for _, p := range s.Exclude {
		if semantics.MatchMetricName(p, name) {
			return false
		}
	}
	if len(s.Include) == 0 {
		return true
	}
	for _, p := range s.Include {
		if semantics.MatchMetricName(p, name) {
			return true
		}
	}
	return false
}

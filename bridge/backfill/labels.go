package backfill

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/pcp-exporter/pcp-exporter/mapping"
)

// ParseLabel parses NAME=VALUE (backfill --label).
func ParseLabel(s string) (mapping.LabelPair, error) {
	name, value, ok := strings.Cut(s, "=")
	if !ok {
		return mapping.LabelPair{}, fmt.Errorf("label %q: want NAME=VALUE", s)
	}
	l := mapping.LabelPair{Name: name, Value: value}
	return l, checkLabels([]mapping.LabelPair{l})
}

// checkLabels refuses extra labels Prometheus would refuse, or that would
// replace the metric name, and a name given twice.
func checkLabels(ls []mapping.LabelPair) error {
	seen := map[string]bool{}
	for _, l := range ls {
		if !validLabelName(l.Name) {
			return fmt.Errorf("label name %q: want [a-zA-Z_][a-zA-Z0-9_]*", l.Name)
		}
		if strings.HasPrefix(l.Name, "__") {
			return fmt.Errorf("label name %q: names starting with __ are reserved", l.Name)
		}
		if l.Value == "" {
			return fmt.Errorf("label %s: empty value (Prometheus drops such labels)", l.Name)
		}
		if !utf8.ValidString(l.Value) {
			return fmt.Errorf("label %s: value is not valid UTF-8", l.Name)
		}
		if seen[l.Name] {
			return fmt.Errorf("label %s given twice", l.Name)
		}
		seen[l.Name] = true
	}
	return nil
}

func validLabelName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9' {
			continue
		}
		return false
	}
	return s != ""
}

// withLabels sets the extra labels on ls: a label of the same name is
// replaced, the others appended.
func withLabels(ls, extra []mapping.LabelPair) []mapping.LabelPair {
	for _, e := range extra {
		i := 0
		for ; i < len(ls) && ls[i].Name != e.Name; i++ {
		}
		if i < len(ls) {
			ls[i].Value = e.Value
		} else {
			ls = append(ls, e)
		}
	}
	return ls
}

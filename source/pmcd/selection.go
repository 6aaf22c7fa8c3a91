package pmcd

import (
	"fmt"
	"path"
	"strings"
)

// Selection chooses the metrics of pmcd to export: a name is selected when
// it matches an include pattern (or there is none) and no exclude pattern.
// A pattern is a metric name or subtree ("kernel.all" selects
// kernel.all.load and the rest of kernel.all), or a glob over the whole
// dotted name when it has any of *?[ ("*" crosses dots: "network.*.in.*").
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
		if p == "" || strings.HasPrefix(p, ".") || strings.HasSuffix(p, ".") {
			return Selection{}, fmt.Errorf("metric pattern %q: not a name, subtree or glob", p)
		}
		if isGlob(p) {
			if _, err := path.Match(p, ""); err != nil {
				return Selection{}, fmt.Errorf("metric pattern %q: %v", p, err)
			}
		}
		if ex {
			s.Exclude = append(s.Exclude, p)
		} else {
			s.Include = append(s.Include, p)
		}
	}
	return s, nil
}

func isGlob(p string) bool { return strings.ContainsAny(p, "*?[") }

func matches(p, name string) bool {
	if isGlob(p) {
		ok, _ := path.Match(p, name)
		return ok
	}
	return name == p || len(name) > len(p) && name[len(p)] == '.' && strings.HasPrefix(name, p)
}

// Selected reports whether the selection exports name.
func (s Selection) Selected(name string) bool {
	for _, p := range s.Exclude {
		if matches(p, name) {
			return false
		}
	}
	if len(s.Include) == 0 {
		return true
	}
	for _, p := range s.Include {
		if matches(p, name) {
			return true
		}
	}
	return false
}

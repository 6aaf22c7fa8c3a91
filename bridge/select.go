package bridge

import (
	"net/url"
	"strings"

	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/semantics"
)

// Selection is what one scrape asks for, so that one exporter serves
// several scrape jobs: families by name (name[]=disk_dev_read_bytes_total,
// client_golang's convention: the name a family has in the text format, or
// its OpenMetrics name) and PCP metrics by name or subtree, or glob
// (names=disk.dev,kernel.all.load,network.*.in.bytes, pmproxy's parameter:
// comma-separated, repeatable; semantics.MatchMetricName's rule). A
// family is selected when it passes both. The nil Selection selects
// everything.
type Selection struct {
	names    map[string]bool
	subtrees []string
}

// SelectionFrom returns the selection of a scrape's query (nil when it
// selects everything).
func SelectionFrom(q url.Values) *Selection {
	var s Selection
	for _, n := range q["name[]"] {
		if s.names == nil {
			s.names = map[string]bool{}
		}
		s.names[n] = true
	}
	for _, v := range q["names"] {
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				s.subtrees = append(s.subtrees, n)
			}
		}
	}
	if s.names == nil && s.subtrees == nil {
		return nil
	}
	return &s
}

// Name reports whether name[] selects a family name (self-metrics,
// target_info).
func (s *Selection) Name(name string) bool {
	return s == nil || s.names == nil || s.names[name]
}

// Subtrees reports whether the selection names PCP subtrees.
func (s *Selection) Subtrees() bool { return s != nil && s.subtrees != nil }

// Family reports whether the selection selects a PCP metric's family.
func (s *Selection) Family(f *mapping.Family) bool {
	if s == nil {
		return true
	}
	if s.names != nil && !s.names[f.Name] && !s.names[f.OMName] {
		return false
	}
	if s.subtrees == nil {
		return true
	}
	for _, t := range s.subtrees {
		if semantics.MatchMetricName(t, f.PCPName) {
			return true
		}
	}
	return false
}

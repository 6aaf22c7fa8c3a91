package mapping

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/pcp-exporter/pcp-exporter/semantics"
)

// LabelPair is one Prometheus label: a valid label name and a valid UTF-8
// value (not escaped).
type LabelPair struct {
	Name, Value string
}

// labelValue turns a PCP label's JSON value into the text of a Prometheus
// label value: a JSON string loses its quotes and escapes, numbers, booleans
// and null keep their JSON text ("42", "true", "null"), arrays their compact
// JSON text. Invalid UTF-8 becomes U+FFFD.
func labelValue(raw string) string {
	raw = strings.TrimSpace(raw)
	if len(raw) >= 2 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal([]byte(raw), &s); err == nil {
			return validUTF8(s)
		}
		return validUTF8(raw[1 : len(raw)-1])
	}
	if len(raw) > 0 && (raw[0] == '[' || raw[0] == '{') {
		var buf bytes.Buffer
		if err := json.Compact(&buf, []byte(raw)); err == nil {
			return validUTF8(buf.String())
		}
	}
	return validUTF8(raw)
}

func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// flattenLabel expands one PCP label into name/value pairs: a JSON object
// value (a compound label) gives one pair per leaf, named name.key.subkey as
// PCP prints them; anything else gives one pair.
func flattenLabel(name, raw string, out []LabelPair) []LabelPair {
	raw = strings.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '{' {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(raw), &m); err == nil {
			keys := make([]string, 0, len(m))
			for k := range m {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				out = flattenLabel(name+"."+k, string(m[k]), out)
			}
			return out
		}
	}
	return append(out, LabelPair{Name: name, Value: labelValue(raw)})
}

// labelSet is a small builder of a sorted, duplicate-free label set.
type labelSet struct {
	pairs []LabelPair
}

// set adds or replaces a label (a later level overrides an earlier one).
func (s *labelSet) set(name, value string) {
	for i := range s.pairs {
		if s.pairs[i].Name == name {
			s.pairs[i].Value = value
			return
		}
	}
	s.pairs = append(s.pairs, LabelPair{name, value})
}

func (s *labelSet) has(name string) bool {
	for i := range s.pairs {
		if s.pairs[i].Name == name {
			return true
		}
	}
	return false
}

func (s *labelSet) sorted() []LabelPair {
	sort.Slice(s.pairs, func(i, j int) bool { return s.pairs[i].Name < s.pairs[j].Name })
	return s.pairs
}

// instIDString formats an instance id as pmproxy's instid label does.
func instIDString(id int32) string { return strconv.FormatInt(int64(id), 10) }

// pcpPairs flattens a PCP label set into raw (unsanitized) name/value pairs
// in label-set order.
func pcpPairs(ls semantics.LabelSet, out []LabelPair) []LabelPair {
	for _, l := range ls {
		out = flattenLabel(l.Name, l.Value, out)
	}
	return out
}

// labelsFor returns the PCP labels a naming exports: all of them by default;
// with the pmproxy naming not the optional ones (userid, groupid) nor the
// domain's (agent), as pmproxy's /metrics leaves them out. pmcd marks the
// optional ones, but an archive's label records may not keep the flag, so
// they are known by level and name too.
func labelsFor(n Naming, ls semantics.LabelSet) semantics.LabelSet {
	if n != NamingPmproxy {
		return ls
	}
	for _, l := range ls {
		if pmproxyOmits(l) {
			out := make(semantics.LabelSet, 0, len(ls))
			for _, l := range ls {
				if !pmproxyOmits(l) {
					out = append(out, l)
				}
			}
			return out
		}
	}
	return ls
}

// pmproxyOmits reports whether pmproxy's /metrics leaves a label out: the
// optional ones, which pmcd adds as domain (agent) and context (userid,
// groupid) labels.
func pmproxyOmits(l semantics.Label) bool {
	if l.Flags&semantics.LabelOptional != 0 {
		return true
	}
	switch l.Flags & 0x3f {
	case semantics.LabelDomain:
		return true
	case semantics.LabelContext:
		return l.Name == "userid" || l.Name == "groupid"
	}
	return false
}

package semantics

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
)

// LabelIndex is one pmLabel entry of a JSONB label set as archives store it:
// offsets and lengths into the set's JSON text. The value span of a string
// includes its quotes.
type LabelIndex struct {
	Name     uint16
	NameLen  uint8
	Flags    uint8
	Value    uint16
	ValueLen uint16
}

// LabelSetFromJSONB builds a LabelSet from a JSONB text and its pmLabel index
// (the form of archive label records and pmLabelSet). Every span is checked
// against the text; names must be non-empty and values valid JSON. The
// result is sorted by name; for a duplicated name the last entry wins.
func LabelSetFromJSONB(text []byte, idx []LabelIndex) (LabelSet, error) {
	if len(idx) == 0 {
		return nil, nil
	}
	s := make(LabelSet, 0, len(idx))
	for i, l := range idx {
		ne := int(l.Name) + int(l.NameLen)
		ve := int(l.Value) + int(l.ValueLen)
		if l.NameLen == 0 || ne > len(text) || ve > len(text) {
			return nil, fmt.Errorf("label %d: name (%d,%d) or value (%d,%d) outside the %d-byte JSON text",
				i, l.Name, l.NameLen, l.Value, l.ValueLen, len(text))
		}
		v := text[l.Value:ve]
		if !json.Valid(v) {
			return nil, fmt.Errorf("label %d: value %q is not JSON", i, v)
		}
		s = append(s, Label{Name: string(text[l.Name:ne]), Value: string(v), Flags: LabelType(l.Flags)})
	}
	return s.normalize(), nil
}

// ParseLabelsJSON parses a flat JSON object of labels (a pmLabelSet's JSON
// text, an MMV label, `pminfo -l` output) into a LabelSet whose labels carry
// flags. Values keep their JSON text (strings keep their quotes) with
// insignificant whitespace removed.
func ParseLabelsJSON(text []byte, flags LabelType) (LabelSet, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(text, &m); err != nil {
		return nil, fmt.Errorf("labels %q: %w", text, err)
	}
	if m == nil {
		return nil, errors.New("labels: not a JSON object")
	}
	s := make(LabelSet, 0, len(m))
	for k, v := range m {
		c, err := compactJSON(v)
		if err != nil {
			return nil, err
		}
		s = append(s, Label{Name: k, Value: c, Flags: flags})
	}
	return s.normalize(), nil
}

func compactJSON(v []byte) (string, error) {
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return "", err
	}
	return b.String(), nil
}

func (s LabelSet) normalize() LabelSet {
	sort.SliceStable(s, func(i, j int) bool { return s[i].Name < s[j].Name })
	out := s[:0]
	for i := range s {
		if len(out) > 0 && out[len(out)-1].Name == s[i].Name {
			out[len(out)-1] = s[i]
			continue
		}
		out = append(out, s[i])
	}
	return out
}

// MergeLabels merges label sets of the hierarchy given lowest precedence first
// (context, domain, indom, cluster, item, instance): a label of a later set
// replaces a label of the same name of an earlier one, as pmMergeLabelSets
// does. The inputs are not modified.
func MergeLabels(sets ...LabelSet) LabelSet {
	n := 0
	for _, s := range sets {
		n += len(s)
	}
	if n == 0 {
		return nil
	}
	out := make(LabelSet, 0, n)
	for _, s := range sets {
		out = append(out, s...)
	}
	return out.normalize()
}

// Get returns the label called name.
func (s LabelSet) Get(name string) (Label, bool) {
	i := sort.Search(len(s), func(i int) bool { return s[i].Name >= name })
	if i < len(s) && s[i].Name == name {
		return s[i], true
	}
	return Label{}, false
}

// AppendJSON appends the set as a JSON object in name order, as `pminfo -l`
// prints it: {"agent":"linux","groupid":0}.
func (s LabelSet) AppendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	for i, l := range s {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendJSONString(dst, l.Name)
		dst = append(dst, ':')
		dst = append(dst, l.Value...)
	}
	return append(dst, '}')
}

// String returns the set as AppendJSON prints it.
func (s LabelSet) String() string { return string(s.AppendJSON(nil)) }

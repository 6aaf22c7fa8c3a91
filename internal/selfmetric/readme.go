package selfmetric

import (
	"fmt"
	"strings"
)

// The README's list of self-metrics is the text between these two lines.
const (
	BeginMarker = "<!-- self-metrics: generated from internal/selfmetric (go test ./internal/selfmetric -update) -->"
	EndMarker   = "<!-- end of self-metrics -->"
)

// Markdown returns the table of ms, as the README lists them.
func Markdown(ms []*Metric) string {
	var b strings.Builder
	b.WriteString("| metric | type | labels | help |\n| --- | --- | --- | --- |\n")
	for _, m := range ms {
		labels := make([]string, len(m.Labels))
		for i, l := range m.Labels {
			labels[i] = "`" + l + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", m.Name, m.Type, strings.Join(labels, ", "), strings.ReplaceAll(m.Help, "|", `\|`))
	}
	return b.String()
}

// Splice returns doc with the text between the markers replaced by list;
// ok is false when doc lacks the markers.
func Splice(doc, list string) (string, bool) {
	i := strings.Index(doc, BeginMarker)
	j := strings.Index(doc, EndMarker)
	if i < 0 || j < i {
		return doc, false
	}
	i += len(BeginMarker)
	return doc[:i] + "\n" + list + doc[j:], true
}

package bridge

import (
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pcp-exporter/pcp-exporter/mapping"
)

// The one encoder of the two text expositions, the Prometheus text format
// 0.0.4 (om false) and OpenMetrics 1.0.0 (om true), line for line as
// client_golang's expfmt writes them, for the /metrics fast path and the
// OpenMetrics backfill. A series line is the sample name (Family.Name in
// both formats), the label block AppendLabels renders (cached per series
// by the fast path) and the value.

// AppendHeader appends a family's HELP (none when empty), TYPE and, in
// OpenMetrics, UNIT lines. OpenMetrics names the family by its OMName and
// types info metrics info; a counter whose samples lack _total (the
// pmproxy naming) is unknown there, as client_golang types it.
func AppendHeader(b []byte, f *mapping.Family, om bool) []byte {
	name := f.Name
	if om {
		name = omName(f)
	}
	if f.Help != "" {
		b = append(b, "# HELP "...)
		b = append(b, name...)
		b = append(b, ' ')
		b = appendEscaped(b, f.Help, om)
		b = append(b, '\n')
	}
	b = append(b, "# TYPE "...)
	b = append(b, name...)
	switch {
	case f.Type == mapping.Counter && (!om || HasCreated(f)):
		b = append(b, " counter\n"...)
	case f.Type == mapping.Counter:
		b = append(b, " unknown\n"...)
	case f.Type == mapping.Info && om:
		b = append(b, " info\n"...)
	case f.Type == mapping.Untyped && om:
		b = append(b, " unknown\n"...)
	case f.Type == mapping.Untyped:
		b = append(b, " untyped\n"...)
	default:
		b = append(b, " gauge\n"...)
	}
	if om && f.Unit != "" {
		b = append(b, "# UNIT "...)
		b = append(b, name...)
		b = append(b, ' ')
		b = append(b, f.Unit...)
		b = append(b, '\n')
	}
	return b
}

// HasCreated reports whether a family's OpenMetrics form is a counter
// (samples named with _total), which may carry _created samples.
func HasCreated(f *mapping.Family) bool {
	return f.Type == mapping.Counter && strings.HasSuffix(f.Name, "_total")
}

// omName is a family's OpenMetrics name: a counter's samples without _total
// (also in the pmproxy naming, whose OMName keeps a PCP name's "total"),
// else OMName.
func omName(f *mapping.Family) string {
	if f.Type == mapping.Counter {
		return strings.TrimSuffix(f.Name, "_total")
	}
	return f.OMName
}

// AppendLabels appends a series' label block and the space before its
// value: `{a="1",b="x"} `, or ` ` without labels. Labels come sorted by
// name (as Family.Labels gives them); value, when not empty, is added as
// the info metric's value label in its sorted place.
func AppendLabels(b []byte, labels []mapping.LabelPair, value string) []byte {
	n := len(labels)
	if value != "" {
		n++
	}
	if n == 0 {
		return append(b, ' ')
	}
	sep := byte('{')
	pending := value != ""
	for _, l := range labels {
		if pending && mapping.InfoValueLabel < l.Name {
			b = appendLabel(append(b, sep), mapping.InfoValueLabel, value)
			sep, pending = ',', false
		}
		b = appendLabel(append(b, sep), l.Name, l.Value)
		sep = ','
	}
	if pending {
		b = appendLabel(append(b, sep), mapping.InfoValueLabel, value)
	}
	return append(b, "} "...)
}

func appendLabel(b []byte, name, value string) []byte {
	b = append(b, name...)
	b = append(b, `="`...)
	b = appendEscaped(b, value, true)
	return append(b, '"')
}

// appendEscaped escapes as both formats do: backslash and newline, and
// double quotes in label values (quote) and in OpenMetrics HELP; invalid
// UTF-8 becomes U+FFFD.
func appendEscaped(b []byte, s string, quote bool) []byte {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	i := 0
	for i < len(s) && s[i] != '\\' && s[i] != '\n' && s[i] != '"' {
		i++
	}
	b = append(b, s[:i]...) // most text needs no escape
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, `\\`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '"' && quote:
			b = append(b, `\"`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// AppendFloat writes a value as client_golang's encoders do: OpenMetrics
// adds ".0" to a number that has neither a point nor an exponent.
func AppendFloat(b []byte, f float64, om bool) []byte {
	switch {
	case f == 1 && !om:
		return append(b, '1')
	case f == 0 && !om:
		return append(b, '0')
	case f == -1 && !om:
		return append(b, "-1"...)
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, +1):
		return append(b, "+Inf"...)
	case math.IsInf(f, -1):
		return append(b, "-Inf"...)
	}
	n := len(b)
	b = strconv.AppendFloat(b, f, 'g', -1, 64)
	if om {
		for _, c := range b[n:] {
			if c == '.' || c == 'e' {
				return b
			}
		}
		b = append(b, ".0"...)
	}
	return b
}

// AppendCreated appends a counter series' _created sample (OpenMetrics),
// without the end of line: the family's OpenMetrics name, the series'
// label block, the start (seconds, as AppendStart renders it).
func AppendCreated(b []byte, f *mapping.Family, labels, start []byte) []byte {
	b = append(b, omName(f)...)
	b = append(b, "_created"...)
	b = append(b, labels...)
	return append(b, start...)
}

// AppendStart renders a start time as _created samples give it: seconds
// since the epoch, as client_golang writes them.
func AppendStart(b []byte, start time.Time) []byte {
	return AppendFloat(b, float64(start.UnixNano())/1e9, true)
}

// CounterStart follows the start of one cumulative series: the one rule
// for OpenMetrics _created samples (scrape, fetch, backfill) and OTLP start
// times (push, backfill). The start is the generation of what the series
// comes from when known (an MMV file's creation, an archive's start or its
// last <mark>, pmcd's start; see source.Generations), else the first
// value's time (OpenTelemetry's "unknown start time": a zero-duration first
// point); a new generation starts it again at its time; a series back
// after a gap with no new generation starts again at its value's time
// (unknown start); a value that went down starts it at the time of the
// value before (a "true reset" whose start is the last time the old run
// was seen: the whole new value counts as increase, as Prometheus's rate
// counts it, with no gap and no overlap between the two runs' points; the
// collector's metricstarttime processor puts it 1 ms before the reset
// point, which says the same with a worse bound). A time before the
// previous one (a replay starting over) is a first value.
type CounterStart struct {
	start, lastT time.Time
	last         float64
	seen         bool
}

// Observe records value v at t and returns the series' start. gen is the
// generation at t (zero: unknown); continued says whether the series had a
// value at the previous read.
func (st *CounterStart) Observe(v float64, t, gen time.Time, continued bool) time.Time {
	prev := st.start
	switch {
	case !st.seen || t.Before(st.lastT):
		st.start, st.seen, prev = t, true, time.Time{}
	case !continued:
		st.start = t
	case v < st.last:
		st.start = st.lastT
	}
	if !gen.IsZero() && gen.After(prev) && !gen.After(t) {
		st.start = gen // the first value, or a new generation since the last
	}
	st.last, st.lastT = v, t
	return st.start
}

package mapping

import (
	"strings"
	"unicode/utf8"
)

// SanitizeMetricName turns any string into a legacy-valid Prometheus metric
// name: every character outside [a-zA-Z0-9_:] (one UTF-8 character, or one
// invalid byte) becomes "_", and a leading digit gets a "_" prefix.
func SanitizeMetricName(s string) string { return sanitize(s, true) }

// SanitizeLabelName turns any string into a valid Prometheus label name:
// every character outside [a-zA-Z0-9_] becomes "_", and a leading digit gets
// a "_" prefix.
func SanitizeLabelName(s string) string { return sanitize(s, false) }

func sanitize(s string, colon bool) string {
	if s == "" {
		return "_"
	}
	ok := true
	for i := 0; i < len(s); i++ {
		if !validNameByte(s[i], colon, i == 0) {
			ok = false
			break
		}
	}
	if ok {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 1)
	if s[0] >= '0' && s[0] <= '9' {
		b.WriteByte('_')
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if validNameByte(c, colon, false) {
				b.WriteByte(c)
			} else {
				b.WriteByte('_')
			}
			i++
			continue
		}
		_, n := utf8.DecodeRuneInString(s[i:])
		b.WriteByte('_')
		i += n
	}
	return b.String()
}

func validNameByte(c byte, colon, first bool) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		return true
	case c >= '0' && c <= '9':
		return !first
	case c == ':':
		return colon
	}
	return false
}

// reservedLabel reports whether a label name taken from PCP would clash with a
// name Prometheus or this mapping reserves: instance and job (set by the
// scraper), any __ name, and the labels the mapping itself adds.
func reservedLabel(name string, own []string) bool {
	if name == "instance" || name == "job" || strings.HasPrefix(name, "__") {
		return true
	}
	for _, o := range own {
		if name == o {
			return true
		}
	}
	return false
}

// dropTypeWord removes the name components equal to word ("counter" in a
// counter, "gauge" in a gauge), as promtool's lint asks ("metric name should
// not include type"); the first component is kept.
func dropTypeWord(name, word string) string {
	if !strings.Contains(name, word) {
		return name
	}
	parts := strings.Split(name, "_")
	out := parts[:1]
	for _, p := range parts[1:] {
		if p != word {
			out = append(out, p)
		}
	}
	return strings.Join(out, "_")
}

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

// snakeCase lowers a camelCase name into snake_case: "commitLimit" becomes
// "commit_limit", "hugepagesFreeBytes" "hugepages_free_bytes", "IOPS" "iops",
// "directMap2M" "direct_map2m" (no break after a digit).
func snakeCase(name string) string {
	lower := true
	for i := 0; i < len(name); i++ {
		if c := name[i]; c >= 'A' && c <= 'Z' {
			lower = false
			break
		}
	}
	if lower {
		return name
	}
	isUpper := func(c byte) bool { return c >= 'A' && c <= 'Z' }
	isLower := func(c byte) bool { return c >= 'a' && c <= 'z' }
	var b strings.Builder
	b.Grow(len(name) + 4)
	for i := 0; i < len(name); i++ {
		c := name[i]
		if isUpper(c) {
			if i > 0 && name[i-1] != '_' && (isLower(name[i-1]) || isUpper(name[i-1]) && i+1 < len(name) && isLower(name[i+1])) {
				b.WriteByte('_')
			}
			c += 'a' - 'A'
		}
		b.WriteByte(c)
	}
	return b.String()
}

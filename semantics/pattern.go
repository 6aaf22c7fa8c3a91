package semantics

import (
	"errors"
	"fmt"
	"strings"
)

// Metric name patterns have one rule wherever metrics are selected (the
// mapping file's include, exclude and rename, --pmcd.metrics, a scrape's
// ?names=):
//
//   - a name without glob characters is the metric of that name and its
//     subtree, as pminfo takes a name: "kernel.percpu" is
//     kernel.percpu.cpu.user and the rest of kernel.percpu, not
//     kernel.percpux;
//   - a pattern with any of *?[ is a glob over the whole dotted name,
//     fnmatch(3)-style as pmproxy's: "*" any run of characters, dots
//     included ("network.*.in.*"), "?" one character, "[...]" one of a
//     class ("[!...]" or "[^...]" none of it), "\" quotes the next
//     character.

// IsGlob reports whether pattern is a glob (has any of *?[) rather than a
// name or subtree.
func IsGlob(pattern string) bool { return strings.ContainsAny(pattern, "*?[") }

// CheckMetricPattern returns an error for a pattern that selects nothing
// by its form: empty, a name with an empty component, a class left open.
func CheckMetricPattern(pattern string) error {
	switch {
	case pattern == "":
		return errors.New("empty metric pattern")
	case !IsGlob(pattern) && (strings.HasPrefix(pattern, ".") || strings.HasSuffix(pattern, ".") || strings.Contains(pattern, "..")):
		return fmt.Errorf("metric pattern %q: not a name, subtree or glob", pattern)
	}
	for i := 0; i < len(pattern); i++ {
		switch pattern[i] {
		case '\\':
			i++
		case '[':
			j := classEnd(pattern, i)
			if j < 0 {
				return fmt.Errorf("metric pattern %q: [ at offset %d is not closed", pattern, i)
			}
			i = j
		}
	}
	return nil
}

// MatchMetricName reports whether a metric name matches pattern (checked
// by CheckMetricPattern; an unchecked bad one matches what it can).
func MatchMetricName(pattern, name string) bool {
	if !IsGlob(pattern) {
		return name == pattern || len(name) > len(pattern) && name[len(pattern)] == '.' && strings.HasPrefix(name, pattern)
	}
	return globMatch(pattern, name)
}

// classEnd returns the index of the ] closing the class that opens at
// p[i], or -1 (a ] first in the class, after any ! or ^, is a member).
func classEnd(p string, i int) int {
	j := i + 1
	if j < len(p) && (p[j] == '!' || p[j] == '^') {
		j++
	}
	if j < len(p) && p[j] == ']' {
		j++
	}
	for ; j < len(p); j++ {
		switch p[j] {
		case '\\':
			j++
		case ']':
			return j
		}
	}
	return -1
}

// globMatch matches the whole of name against the glob p, byte by byte
// (names are ASCII), with the usual single backtracking point of "*".
func globMatch(p, name string) bool {
	pi, ni := 0, 0
	starP, starN := -1, 0
	for ni < len(name) {
		if pi < len(p) {
			switch c := p[pi]; c {
			case '*':
				starP, starN = pi, ni
				pi++
				continue
			case '?':
				pi++
				ni++
				continue
			case '[':
				if j := classEnd(p, pi); j >= 0 {
					if inClass(p[pi+1:j], name[ni]) {
						pi, ni = j+1, ni+1
						continue
					}
					break
				}
				fallthrough // an open [ is itself
			default:
				if c == '\\' && pi+1 < len(p) {
					pi++
					c = p[pi]
				}
				if c == name[ni] {
					pi++
					ni++
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		starN++
		pi, ni = starP+1, starN
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// inClass reports whether c is in the class body (between [ and ]).
func inClass(body string, c byte) bool {
	neg := false
	if body != "" && (body[0] == '!' || body[0] == '^') {
		neg, body = true, body[1:]
	}
	in := false
	for i := 0; i < len(body); i++ {
		lo := body[i]
		if lo == '\\' && i+1 < len(body) {
			i++
			lo = body[i]
		}
		hi := lo
		if i+2 < len(body) && body[i+1] == '-' {
			hi = body[i+2]
			if hi == '\\' && i+3 < len(body) {
				hi = body[i+3]
				i++
			}
			i += 2
		}
		if lo <= c && c <= hi {
			in = true
		}
	}
	return in != neg
}

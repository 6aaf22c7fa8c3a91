package mapping

import (
	"strings"
	"unicode/utf8"

	"github.com/pcp-exporter/pcp-exporter/semantics"
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

// abbreviations are PCP name components that promtool's lint reads as
// abbreviated units ("metric names should not contain abbreviated units")
// where PCP means a word: the d_ of the Linux disk metrics is "discard"
// (disk.dev.d_await, disk.dm.d_avg_rqsz).
var abbreviations = map[string]string{"d": "discard"}

// expandAbbreviations spells out the abbreviations that begin a word of
// several components (d_await: a word follows), where they cannot be a
// unit; the first and last components are kept (a trailing "_d" may be
// days).
func expandAbbreviations(name string) string {
	parts := strings.Split(name, "_")
	changed := false
	for i := 1; i < len(parts)-1; i++ {
		next := parts[i+1]
		if w, ok := abbreviations[parts[i]]; ok && next != "" && next[0] >= 'a' && next[0] <= 'z' {
			parts[i], changed = w, true
		}
	}
	if !changed {
		return name
	}
	return strings.Join(parts, "_")
}

// typeWordStandIns replace a type word in the fallback name of a metric
// whose lint-clean name is taken ("types.double_counter" next to the gauge
// "types.double"): PCP's own word for the semantics.
var typeWordStandIns = map[string]string{"counter": "cumulative", "gauge": "instant"}

// dropTypeWord removes the name components equal to word ("counter" in a
// counter, "gauge" in a gauge), as promtool's lint asks ("metric name should
// not include type"), or with standIn replaces them; the first component is
// kept.
func dropTypeWord(name, word string, standIn bool) string {
	if !strings.Contains(name, word) {
		return name
	}
	parts := strings.Split(name, "_")
	out := parts[:1]
	for _, p := range parts[1:] {
		switch {
		case p != word:
			out = append(out, p)
		case standIn:
			out = append(out, typeWordStandIns[word])
		}
	}
	return strings.Join(out, "_")
}

// Words that name a unit in a PCP metric name. Non-base words are what
// promtool's lint rejects (non-base units such as hours, abbreviations such
// as sec, kb and ms, prefixed units such as kilobytes).
var (
	timeWords = wordSet("s sec secs ms msec msecs millisec millisecs us usec usecs microsec microsecs ns nsec nsecs nanosec nanosecs " +
		"millisecond milliseconds microsecond microseconds nanosecond nanoseconds m minute minutes h hr hrs hour hours d day days week weeks")
	spaceWords = wordSet("b byte kb kbyte kbytes mb mbyte mbytes gb gbyte gbytes tb tbyte tbytes pb pbyte pbytes eb ebyte ebytes " +
		"kib mib gib tib pib eib kilobyte kilobytes megabyte megabytes gigabyte gigabytes terabyte terabytes petabyte petabytes exabyte exabytes " +
		"kibibyte kibibytes mebibyte mebibytes gibibyte gibibytes tebibyte tebibytes")
	// words that may sit in a unit phrase without making it one
	timeBase   = wordSet("second seconds")
	spaceBase  = wordSet("bytes")
	countWords = wordSet("count counts")
	phraseGlue = wordSet("per squared cubed")
)

func wordSet(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

// dropUnitWords removes from name the phrases that spell its unit in words
// promtool's lint rejects ("types.hours" in hours, "types.sec_squared",
// "types.mbyte_per_hour", "types.kbyte_per_count"): a run of components
// made of unit words of the metric's dimensions, "per", "squared" and
// "cubed", holding at least one non-base unit word. The value is converted
// to base units and the unit suffix says them, so nothing is lost; the
// first component is kept.
func dropUnitWords(name string, u semantics.Units) string {
	if u.DimTime == 0 && u.DimSpace == 0 {
		return name
	}
	parts := strings.Split(name, "_")
	nonBase := func(p string) bool {
		return u.DimTime != 0 && timeWords[p] || u.DimSpace != 0 && spaceWords[p]
	}
	inPhrase := func(p string) bool {
		return nonBase(p) || phraseGlue[p] || u.DimTime != 0 && timeBase[p] || u.DimSpace != 0 && spaceBase[p] || u.DimCount != 0 && countWords[p]
	}
	out := parts[:1]
	for i := 1; i < len(parts); {
		j := i
		found := false
		for j < len(parts) && inPhrase(parts[j]) {
			found = found || nonBase(parts[j])
			j++
		}
		if j == i {
			out = append(out, parts[i])
			i++
			continue
		}
		if !found {
			out = append(out, parts[i:j]...)
		}
		i = j
	}
	return strings.Join(out, "_")
}

// joinReservedSuffix joins the last component of a gauge's name ending in
// _total, _count, _sum or _bucket to the one before ("hugepages_total"
// becomes "hugepagestotal"): promtool's lint reserves those suffixes for
// counters, histograms and summaries.
func joinReservedSuffix(name string) string {
	for _, s := range []string{"_total", "_count", "_sum", "_bucket"} {
		if strings.HasSuffix(name, s) && len(name) > len(s) {
			return name[:len(name)-len(s)] + s[1:]
		}
	}
	return name
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

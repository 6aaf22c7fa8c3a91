package derive

import (
	"errors"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/pcp-exporter/pcp-exporter/semantics"
)

// ParseUnits parses a units string as libpcp 6.0.3's pmParseUnitsStr(3)
// does for rescale() and mkconst(..., units=...): a dividend and, after the
// first '/', a divisor, each a sequence of words separated by white space:
// unit keywords (case-insensitive: "Kbyte", "millisec", "count x 10^3",
// "time-N", "space-N"...), each dimension at most once and each followed by
// an optional exponent ("^-8" to "^15"), and numbers (strtod's), whose
// product is a multiplier the two functions ignore. "" is dimensionless.
// The errors are libpcp's messages. Where libpcp aborts (a time-N scale
// above hours on both sides of the '/', or with the exponent 0), the
// string is refused.
func ParseUnits(s string) (semantics.Units, error) {
	u, _, err := parseUnitsStr(s)
	return u, err
}

// The messages of pmParseUnitsStr's errors.
var (
	errUnitWord   = errors.New("unrecognized or duplicate base unit")
	errUnitNumber = errors.New("invalid floating point literal")
	errTimeScale  = errors.New("time scale beyond hours on both sides of '/' (libpcp aborts)")
)

// unitsPart is one side of the '/', with libpcp's wider fields.
type unitsPart struct {
	dimSpace, dimTime, dimCount int
	scaleSpace, scaleTime       int
	scaleCount                  int
	mult                        float64
}

// keyword is a unit word or an exponent and the scale (or dimension) it
// gives.
type keyword struct {
	word  string
	scale int
}

// The words, in libpcp's order: where one word is a prefix of another
// ("count x 10" of "count x 10^3"), the longer comes first.
var (
	timeWords = append([]keyword{
		{"nanoseconds", int(semantics.TimeNSec)}, {"nanosecond", int(semantics.TimeNSec)}, {"nanosec", int(semantics.TimeNSec)}, {"ns", int(semantics.TimeNSec)},
		{"microseconds", int(semantics.TimeUSec)}, {"microsecond", int(semantics.TimeUSec)}, {"microsec", int(semantics.TimeUSec)}, {"us", int(semantics.TimeUSec)},
		{"milliseconds", int(semantics.TimeMSec)}, {"millisecond", int(semantics.TimeMSec)}, {"millisec", int(semantics.TimeMSec)}, {"ms", int(semantics.TimeMSec)},
		{"seconds", int(semantics.TimeSec)}, {"second", int(semantics.TimeSec)}, {"sec", int(semantics.TimeSec)}, {"s", int(semantics.TimeSec)},
		{"minutes", int(semantics.TimeMin)}, {"minute", int(semantics.TimeMin)}, {"min", int(semantics.TimeMin)},
		{"hours", int(semantics.TimeHour)}, {"hour", int(semantics.TimeHour)}, {"hr", int(semantics.TimeHour)}, {"h", int(semantics.TimeHour)},
	}, numbered("time-")...)
	spaceWords = append(spaceWordList(), numbered("space-")...)
	countWords = []keyword{
		{"count x 10^-8", -8}, {"count x 10^-7", -7}, {"count x 10^-6", -6}, {"count x 10^-5", -5},
		{"count x 10^-4", -4}, {"count x 10^-3", -3}, {"count x 10^-2", -2}, {"count x 10^-1", -1},
		{"count x 10^2", 2}, {"count x 10^3", 3}, {"count x 10^4", 4}, {"count x 10^5", 5},
		{"count x 10^6", 6}, {"count x 10^7", 7}, {"count x 10", 1}, {"counts", 0}, {"count", 0},
	}
	exponents = exponentList()
)

// numbered is prefix-0 to prefix-15 (the scales' 4 bits).
func numbered(prefix string) []keyword {
	var k []keyword
	for i := 0; i <= 15; i++ {
		k = append(k, keyword{prefix + strconv.Itoa(i), i})
	}
	return k
}

// spaceWordList is the words of the space scales: bytes, then for each
// scale its abbreviations and names (binary and the older decimal ones).
func spaceWordList() []keyword {
	k := []keyword{{"bytes", int(semantics.SpaceByte)}, {"byte", int(semantics.SpaceByte)}}
	for i, p := range []struct{ letter, binary, decimal string }{
		{"K", "Kibi", "Kilo"}, {"M", "Mebi", "Mega"}, {"G", "Gibi", "Giga"}, {"T", "Tebi", "Tera"},
		{"P", "Pebi", "Peta"}, {"E", "Exbi", "Exa"}, {"Z", "Zebi", "Zetta"}, {"Y", "Yobi", "Yotta"},
	} {
		for _, w := range []string{p.letter + "B", p.letter + "iB", p.letter + "bytes", p.letter + "byte",
			p.binary + "bytes", p.binary + "byte", p.decimal + "bytes", p.decimal + "byte"} {
			k = append(k, keyword{w, i + 1})
		}
	}
	return k
}

// exponentList is "^-8" to "^15" (a divisor's dimension may reach 15
// before the quotient is checked).
func exponentList() []keyword {
	var k []keyword
	for i := -8; i <= 15; i++ {
		k = append(k, keyword{"^" + strconv.Itoa(i), i})
	}
	return k
}

// skipWord returns the length of the first of words that s starts with
// (ASCII case-insensitively) followed by white space, '^' or the end, and
// its scale; n is 0 when none is.
func skipWord(s string, words []keyword) (n, scale int) {
	for _, k := range words {
		l := len(k.word)
		if l <= len(s) && asciiEqualFold(s[:l], k.word) && (l == len(s) || isSpace(int(s[l])) || s[l] == '^') {
			return l, k.scale
		}
	}
	return 0, 0
}

func asciiEqualFold(a, b string) bool {
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// parsePart parses one side of the '/' (libpcp's __pmParseUnitsStrPart).
func parsePart(s string) (unitsPart, error) {
	p := unitsPart{mult: 1}
	for i := 0; i < len(s); {
		if isSpace(int(s[i])) {
			i++
			continue
		}
		if c := s[i]; c == '-' || c == '.' || ('0' <= c && c <= '9') {
			m, n, ok := strtod(s[i:])
			if !ok {
				return p, errUnitNumber
			}
			p.mult *= m
			i += n
			continue
		}
		// a base unit, each dimension once (one whose exponent was 0 may
		// come again)
		var dim *int
		n := 0
		if p.dimTime == 0 {
			if n, p.scaleTime = skipWord(s[i:], timeWords); n > 0 {
				dim = &p.dimTime
			}
		}
		if dim == nil && p.dimSpace == 0 {
			if n, p.scaleSpace = skipWord(s[i:], spaceWords); n > 0 {
				dim = &p.dimSpace
			}
		}
		if dim == nil && p.dimCount == 0 {
			if n, p.scaleCount = skipWord(s[i:], countWords); n > 0 {
				dim = &p.dimCount
			}
		}
		if dim == nil {
			return p, errUnitWord
		}
		i += n
		if i == len(s) || isSpace(int(s[i])) {
			*dim = 1
		} else if n, e := skipWord(s[i:], exponents); n > 0 {
			*dim = e
			i += n
		}
		// else the dimension stays 0, and what follows is refused next
	}
	return p, nil
}

// parseUnitsStr is pmParseUnitsStr: the units and the multiplier.
func parseUnitsStr(s string) (semantics.Units, float64, error) {
	var u semantics.Units
	num, den := s, ""
	if i := strings.IndexByte(s, '/'); i >= 0 {
		num, den = s[:i], s[i+1:]
	}
	a, err := parsePart(num)
	if err != nil {
		return u, 1, err
	}
	b, err := parsePart(den)
	if err != nil {
		return u, 1, err
	}
	for _, d := range []struct {
		dim  int
		name string
	}{{a.dimSpace - b.dimSpace, "space"}, {a.dimTime - b.dimTime, "time"}, {a.dimCount - b.dimCount, "count"}} {
		if d.dim < -8 || d.dim > 7 { // pmUnits' 4-bit fields
			return u, 1, errors.New(d.name + " dimension out of bounds")
		}
	}
	u.DimSpace, u.DimTime, u.DimCount = int8(a.dimSpace-b.dimSpace), int8(a.dimTime-b.dimTime), int8(a.dimCount-b.dimCount)
	mult := b.mult / a.mult
	if (a.dimTime == 0) == (b.dimTime == 0) && max(a.scaleTime, b.scaleTime) > int(semantics.TimeHour) {
		return semantics.Units{}, 1, errTimeScale
	}
	u.ScaleSpace = uint8(quotientScale(a.dimSpace, a.scaleSpace, b.dimSpace, b.scaleSpace, 0, func(s int) float64 { return math.Pow(1024, float64(s)) }, &mult))
	u.ScaleCount = int8(quotientScale(a.dimCount, a.scaleCount, b.dimCount, b.scaleCount, 0, func(s int) float64 { return math.Pow(10, float64(s)) }, &mult))
	secs := [...]float64{1e-9, 1e-6, 1e-3, 1, 60, 3600}
	u.ScaleTime = uint8(quotientScale(a.dimTime, a.scaleTime, b.dimTime, b.scaleTime, int(semantics.TimeSec), func(s int) float64 { return secs[s] }, &mult))
	return u, mult, nil
}

// quotientScale is the scale of one dimension of a / b: the scale of the
// side that has the dimension alone; on both sides (or neither) the base
// scale, or none when they cancel, the two sides' scales going into the
// multiplier (unit is one unit of a scale in the base's).
func quotientScale(aDim, aScale, bDim, bScale, base int, unit func(int) float64, mult *float64) int {
	switch {
	case aDim == 0 && bDim != 0:
		return bScale
	case bDim == 0 && aDim != 0:
		return aScale
	}
	*mult *= math.Pow(unit(aScale), -float64(aDim))
	*mult *= math.Pow(unit(bScale), float64(bDim))
	if aDim == bDim {
		return 0
	}
	return base
}

// strtod parses the number s starts with as C's strtod does (decimal or
// hexadecimal, inf, infinity, nan and nan(...), case-insensitive): its
// value and length. ok is false when s starts with none, and where strtod
// sets ERANGE: the value overflows, or underflows inexactly (below the
// normal range and not exactly the subnormal it rounds to).
func strtod(s string) (v float64, n int, ok bool) {
	i := 0
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		i++
	}
	neg := i > 0 && s[0] == '-'
	word := strings.ToLower(s[i:min(len(s), i+8)])
	switch {
	case strings.HasPrefix(word, "infinity"):
		return math.Inf(sign(neg)), i + 8, true
	case strings.HasPrefix(word, "inf"):
		return math.Inf(sign(neg)), i + 3, true
	case strings.HasPrefix(word, "nan"):
		n = i + 3
		j := n
		if j < len(s) && s[j] == '(' {
			for j++; j < len(s) && (isDigit(int(s[j])) || isLetter(int(s[j])) || s[j] == '_'); j++ {
			}
			if j < len(s) && s[j] == ')' {
				n = j + 1
			}
		}
		return math.NaN(), n, true
	}
	hex := i+1 < len(s) && s[i] == '0' && (s[i+1]|0x20) == 'x'
	digit := isDigit
	zero := "0."
	if hex {
		digit, zero = isHexDigit, "0.xX"
		i += 2
	}
	mant := i
	digits := 0
	for ; i < len(s) && digit(int(s[i])); i++ {
		digits++
	}
	if i < len(s) && s[i] == '.' {
		for i++; i < len(s) && digit(int(s[i])); i++ {
			digits++
		}
	}
	if digits == 0 {
		if hex { // "0x" and no digit: the "0"
			return 0, mant - 1, true
		}
		return 0, 0, false
	}
	end, mantEnd := i, i
	e := byte('e')
	if hex {
		e = 'p'
	}
	if i < len(s) && s[i]|0x20 == e {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if j < len(s) && isDigit(int(s[j])) {
			for j < len(s) && isDigit(int(s[j])) {
				j++
			}
			end = j
		}
	}
	lit := s[:end]
	if hex && end == mantEnd {
		lit += "p0" // Go's hexadecimal floats need their exponent
	}
	v, err := strconv.ParseFloat(lit, 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange):
		return 0, 0, false
	case math.IsInf(v, 0):
		return v, end, false // overflow
	case math.Abs(v) >= 0x1p-1022 || strings.Trim(s[mant:mantEnd], zero) == "":
		return v, end, true // normal, or 0 written as 0
	case v == 0:
		return v, end, false // a number too small for a subnormal
	}
	// a subnormal: exact or not (the literal's exponent is within its
	// length of the subnormals', so the rational stays small)
	var r big.Rat
	if _, exact := r.SetString(lit); !exact {
		return v, end, false
	}
	return v, end, new(big.Rat).SetFloat64(v).Cmp(&r) == 0
}

func sign(neg bool) int {
	if neg {
		return -1
	}
	return 1
}

func isLetter(c int) bool   { return 'a' <= c|0x20 && c|0x20 <= 'z' }
func isHexDigit(c int) bool { return isDigit(c) || ('a' <= c|0x20 && c|0x20 <= 'f') }

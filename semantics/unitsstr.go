package semantics

import "strconv"

var (
	spaceWords = [...]string{"byte", "Kbyte", "Mbyte", "Gbyte", "Tbyte", "Pbyte", "Ebyte", "Zbyte", "Ybyte"}
	timeWords  = [...]string{"nanosec", "microsec", "millisec", "sec", "min", "hour"}
	extraNames = [...]string{"", "temperature", "voltage", "current", "power"}
	extraScale = [...][]string{
		nil,
		{"", "C", "F", "K"},
		{"", "V", "mV", "uV"},
		{"", "A", "mA", "uA"},
		{"", "kW", "W", "mW", "uW"},
	}
)

// String returns PCP's string form of u as pmUnitsStr of PCP 7.2 and later
// prints it: "Kbyte / sec", "count x 10^3", "millisec", "/ sec", "" for no
// dimension, and "count x 10^6" for a dimensionless unit with a count scale.
func (u Units) String() string { return string(u.appendStr(nil, false)) }

// StringPCP6 returns the string form printed by PCP 6.x to 7.1, which differs
// from String only for a dimensionless unit with a count scale ("x 10^6").
func (u Units) StringPCP6() string { return string(u.appendStr(nil, true)) }

func (u Units) extraWord() string {
	e := int(u.ExtraUnit)
	if e < 0 {
		e = -e
	}
	if e >= len(extraNames) || e == 0 {
		return "extra-" + strconv.Itoa(e)
	}
	s := extraScale[e]
	if int(u.ExtraScale) < len(s) && u.ExtraScale != 0 {
		return extraNames[e] + " (" + s[u.ExtraScale] + ")"
	}
	return extraNames[e] + " (scale-" + strconv.Itoa(int(u.ExtraScale)) + ")"
}

func (u Units) countWord() string {
	switch u.ScaleCount {
	case 0:
		return "count"
	case 1:
		return "count x 10"
	}
	return "count x 10^" + strconv.Itoa(int(u.ScaleCount))
}

func appendTerm(dst []byte, start int, word string, dim int) []byte {
	if len(dst) > start {
		dst = append(dst, ' ')
	}
	dst = append(dst, word...)
	if dim != 1 {
		dst = append(dst, '^')
		dst = strconv.AppendInt(dst, int64(dim), 10)
	}
	return dst
}

func (u Units) appendStr(dst []byte, pcp6 bool) []byte {
	start := len(dst)
	type term struct {
		dim  int
		word func() string
	}
	terms := [4]term{
		{extraDim(u.ExtraUnit), u.extraWord},
		{int(u.DimSpace), func() string {
			if int(u.ScaleSpace) < len(spaceWords) {
				return spaceWords[u.ScaleSpace]
			}
			return "space-" + strconv.Itoa(int(u.ScaleSpace))
		}},
		{int(u.DimTime), func() string {
			if int(u.ScaleTime) < len(timeWords) {
				return timeWords[u.ScaleTime]
			}
			return "time-" + strconv.Itoa(int(u.ScaleTime))
		}},
		{int(u.DimCount), u.countWord},
	}
	neg := false
	for _, t := range terms {
		if t.dim > 0 {
			dst = appendTerm(dst, start, t.word(), t.dim)
		} else if t.dim < 0 {
			neg = true
		}
	}
	if neg {
		if len(dst) > start {
			dst = append(dst, " /"...)
		} else {
			dst = append(dst, '/')
		}
		for _, t := range terms {
			if t.dim < 0 {
				dst = append(dst, ' ')
				dst = append(dst, t.word()...)
				if t.dim != -1 {
					dst = append(dst, '^')
					dst = strconv.AppendInt(dst, int64(-t.dim), 10)
				}
			}
		}
	}
	if len(dst) == start && u.ScaleCount != 0 {
		if pcp6 {
			if u.ScaleCount == 1 {
				return append(dst, "x 10"...)
			}
			dst = append(dst, "x 10^"...)
			return strconv.AppendInt(dst, int64(u.ScaleCount), 10)
		}
		return append(dst, u.countWord()...)
	}
	return dst
}

func extraDim(x int8) int {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}

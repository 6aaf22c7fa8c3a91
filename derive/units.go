package derive

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pcp-exporter/pcp-exporter/semantics"
)

// ParseUnits parses a units string as pmParseUnitsStr(3) accepts it for
// rescale() and mkconst(..., units=...): unit words ("Kbyte", "millisec",
// "count x 10^3", plurals and the usual abbreviations), separated by spaces
// or '*', with '/' starting the denominator and "^N" powers, e.g.
// "Kbyte / sec", "Mbytes/hour", "1/sec", "sec^-1", "count x 10^6 / sec".
// "" and "none" are dimensionless.
func ParseUnits(s string) (semantics.Units, error) {
	var u semantics.Units
	var dimSpace, dimTime, dimCount int
	seenSpace, seenTime, seenCount := false, false, false
	denom := false
	f := unitFields(s)
	for i := 0; i < len(f); i++ {
		w := f[i]
		if w == "/" {
			if denom {
				return u, fmt.Errorf("more than one '/' in %q", s)
			}
			denom = true
			continue
		}
		if w == "*" {
			continue
		}
		power := 1
		if j := strings.IndexByte(w, '^'); j > 0 {
			p, err := strconv.Atoi(w[j+1:])
			if err != nil {
				return u, fmt.Errorf("bad power in %q", w)
			}
			power = p
			w = w[:j]
		} else if i+1 < len(f) && strings.HasPrefix(f[i+1], "^") {
			p, err := strconv.Atoi(f[i+1][1:])
			if err != nil {
				return u, fmt.Errorf("bad power in %q", f[i+1])
			}
			power = p
			i++
		}
		if denom {
			power = -power
		}
		lw := strings.ToLower(w)
		if n, err := strconv.ParseFloat(lw, 64); err == nil {
			if n != 1 {
				return u, fmt.Errorf("unsupported scale factor %q", w)
			}
			continue
		}
		if lw == "none" {
			continue
		}
		if sc, ok := spaceScale(lw); ok {
			if seenSpace && sc != u.ScaleSpace {
				return u, fmt.Errorf("conflicting space scales in %q", s)
			}
			seenSpace = true
			u.ScaleSpace = sc
			dimSpace += power
			continue
		}
		if sc, ok := timeScale(lw); ok {
			if seenTime && sc != u.ScaleTime {
				return u, fmt.Errorf("conflicting time scales in %q", s)
			}
			seenTime = true
			u.ScaleTime = sc
			dimTime += power
			continue
		}
		if lw == "count" || lw == "counts" {
			seenCount = true
			dimCount += power
			// "count x 10^N"
			if i+2 < len(f) && strings.ToLower(f[i+1]) == "x" {
				e := f[i+2]
				if !strings.HasPrefix(e, "10") {
					return u, fmt.Errorf("bad count scale %q", e)
				}
				sc := 1
				if e != "10" {
					p, err := strconv.Atoi(strings.TrimPrefix(e, "10^"))
					if err != nil || !strings.HasPrefix(e, "10^") {
						return u, fmt.Errorf("bad count scale %q", e)
					}
					sc = p
				}
				if sc < -8 || sc > 7 {
					return u, fmt.Errorf("count scale out of range in %q", e)
				}
				u.ScaleCount = int8(sc)
				i += 2
			}
			continue
		}
		return u, fmt.Errorf("unrecognized unit %q", w)
	}
	_ = seenCount
	for _, d := range []int{dimSpace, dimTime, dimCount} {
		if d < -8 || d > 7 {
			return u, fmt.Errorf("dimension out of range in %q", s)
		}
	}
	u.DimSpace, u.DimTime, u.DimCount = int8(dimSpace), int8(dimTime), int8(dimCount)
	if dimSpace == 0 {
		u.ScaleSpace = 0
	}
	if dimTime == 0 {
		u.ScaleTime = 0
	}
	if dimCount == 0 {
		u.ScaleCount = 0
	}
	return u, nil
}

// unitFields splits a units string into words, '/' and '*'.
func unitFields(s string) []string {
	var out []string
	var cur strings.Builder
	flush := func() {
		if cur.Len() > 0 {
			out = append(out, cur.String())
			cur.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			flush()
		case c == '/' || c == '*':
			flush()
			out = append(out, string(c))
		default:
			cur.WriteByte(c)
		}
	}
	flush()
	return out
}

func spaceScale(w string) (uint8, bool) {
	w = strings.TrimSuffix(w, "s")
	for i, p := range []string{"", "k", "m", "g", "t", "p", "e", "z", "y"} {
		if w == p+"byte" || (p != "" && w == p+"b") {
			return uint8(i), true
		}
	}
	return 0, false
}

func timeScale(w string) (uint8, bool) {
	switch w {
	case "nanosec", "nanosecs", "nanosecond", "nanoseconds", "nsec", "nsecs", "ns":
		return semantics.TimeNSec, true
	case "microsec", "microsecs", "microsecond", "microseconds", "usec", "usecs", "us":
		return semantics.TimeUSec, true
	case "millisec", "millisecs", "millisecond", "milliseconds", "msec", "msecs", "ms":
		return semantics.TimeMSec, true
	case "sec", "secs", "second", "seconds", "s":
		return semantics.TimeSec, true
	case "min", "mins", "minute", "minutes":
		return semantics.TimeMin, true
	case "hour", "hours", "hr", "hrs", "h":
		return semantics.TimeHour, true
	}
	return 0, false
}

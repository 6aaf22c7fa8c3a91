package mapping

import (
	"math"
	"strconv"
	"strings"

	"github.com/pcp-exporter/pcp-exporter/semantics"
)

// Unit is the base unit a PCP pmUnits converts to: the factor that turns a
// PCP value into that unit, the Prometheus name suffix ("bytes", "seconds",
// "bytes_per_second", "" when dimensionless) and the UCUM unit used by
// OpenTelemetry ("By", "s", "By/s", "{count}", "1").
type Unit struct {
	// Scale is Mul/Div. Values convert as libpcp's pmConvScale converts a
	// double (Convert): v * (mult/div), the quotient rounded first, so
	// that 743132 millisec is 743.1320000000001 s as libpcp (pmfetchgroup,
	// pmcc, pmval) gives it, not 743132/1000 = 743.132.
	Scale float64
	// Mul and Div are libpcp's integer mult and div (exact in a float64):
	// their quotient is the same double however they are reduced.
	Mul, Div float64
	Suffix   string
	UCUM     string
}

// Convert converts a value to the unit: x * Scale, as libpcp's
// pmConvScale(PM_TYPE_DOUBLE) does (src/libpcp/src/units.c).
func (u Unit) Convert(x float64) float64 { return convert(x, u.Scale) }

// convert is the one unit conversion of every output (scrape, push,
// backfill, the node naming's families): libpcp's, one multiplication by
// the rounded quotient mult/div; a scale of 1 leaves x as it is.
func convert(x, scale float64) float64 {
	if scale == 1 {
		return x
	}
	return x * scale
}

// factor multiplies the unit's Mul or Div by f^dim.
func (u *Unit) factor(f float64, dim int) {
	if dim < 0 {
		f, dim = 1/f, -dim
	}
	for ; dim > 0; dim-- {
		if f >= 1 {
			u.Mul *= math.Round(f)
		} else {
			u.Div *= math.Round(1 / f)
		}
	}
}

// spaceFactor is 1024^s for PCP space scales (byte ... Ybyte).
func spaceFactor(s uint8) float64 { return math.Ldexp(1, 10*int(s)) }

// timeFactors converts PCP time scales (nsec ... hour) to seconds.
var timeFactors = [...]float64{1e-9, 1e-6, 1e-3, 1, 60, 3600}

// singular words used after "per".
var singular = map[string]string{"bytes": "byte", "seconds": "second", "volts": "volt", "amperes": "ampere", "watts": "watt"}

// extra (PCP 7.2) unit words: Prometheus word, UCUM, and factors per scale.
type extraKind struct {
	word, ucum string
	factors    map[uint8]float64 // scale -> factor to the base unit
	words      map[uint8]string  // scale -> word when no conversion exists
}

var extraKinds = map[int8]extraKind{
	1: {word: "celsius", ucum: "Cel", factors: map[uint8]float64{1: 1},
		words: map[uint8]string{2: "fahrenheit", 3: "kelvin"}},
	2: {word: "volts", ucum: "V", factors: map[uint8]float64{1: 1, 2: 1e-3, 3: 1e-6}},
	3: {word: "amperes", ucum: "A", factors: map[uint8]float64{1: 1, 2: 1e-3, 3: 1e-6}},
	4: {word: "watts", ucum: "W", factors: map[uint8]float64{1: 1e3, 2: 1, 3: 1e-3, 4: 1e-6}},
}

var powWords = map[int]string{2: "squared", 3: "cubed"}

type unitTerm struct {
	word, ucum string
	dim        int
}

// BaseUnit returns the base unit of u and the factor from PCP's scale to it.
// Space goes to bytes (scales are powers of 1024), time to seconds, counts
// have their 10^n scale applied and no suffix; a negative dimension puts the
// term after "per" ("Kbyte / sec" is bytes_per_second, By/s).
func BaseUnit(u semantics.Units) Unit {
	res := Unit{Mul: 1, Div: 1}
	var terms []unitTerm
	if u.ExtraUnit != 0 {
		d := 1
		if u.ExtraUnit < 0 {
			d = -1
		}
		k, ok := extraKinds[abs8(u.ExtraUnit)]
		word, ucum := "extra_"+strconv.Itoa(int(abs8(u.ExtraUnit))), "{extra}"
		if ok {
			word, ucum = k.word, k.ucum
			if f, ok := k.factors[u.ExtraScale]; ok {
				res.factor(f, d)
			} else if w, ok := k.words[u.ExtraScale]; ok {
				word = w
				ucum = map[string]string{"fahrenheit": "[degF]", "kelvin": "K"}[w]
			}
		}
		terms = append(terms, unitTerm{word, ucum, d})
	}
	dims := u
	dims.ExtraUnit, dims.ExtraScale = 0, 0
	base := semantics.Units{DimSpace: u.DimSpace, DimTime: u.DimTime, DimCount: u.DimCount, ScaleTime: semantics.TimeSec}
	sc, err := semantics.ScaleOf(dims, base)
	switch {
	case u.ExtraUnit != 0 && dims.IsNone():
		// extra units alone: their factor only
	case err == nil:
		// libpcp's factors (pmConvScale), exact in a float64 below 2^53
		res.Mul *= float64(sc.Mult)
		res.Div *= float64(sc.Div)
	default:
		// scales libpcp cannot convert (above Ebyte or hour): powers of
		// 1024 for space, an unknown time scale left as it is
		if u.DimSpace != 0 {
			res.factor(spaceFactor(u.ScaleSpace), int(u.DimSpace))
		}
		if u.DimTime != 0 && int(u.ScaleTime) < len(timeFactors) {
			res.factor(timeFactors[u.ScaleTime], int(u.DimTime))
		}
		if u.DimCount != 0 {
			res.factor(math.Pow(10, float64(u.ScaleCount)), int(u.DimCount))
		}
	}
	if u.DimSpace != 0 {
		terms = append(terms, unitTerm{"bytes", "By", int(u.DimSpace)})
	}
	if u.DimTime != 0 {
		terms = append(terms, unitTerm{"seconds", "s", int(u.DimTime)})
	}
	if u.DimCount != 0 {
		terms = append(terms, unitTerm{"", "{count}", int(u.DimCount)})
	}
	var num, den []string
	var unum, uden []string
	for _, t := range terms {
		d := t.dim
		if d < 0 {
			d = -d
		}
		w, uc := t.word, t.ucum
		if d != 1 {
			if uc != "{count}" {
				uc += strconv.Itoa(d)
			}
			if w != "" {
				pw, ok := powWords[d]
				if !ok {
					pw = "pow" + strconv.Itoa(d)
				}
				w += "_" + pw
			}
		}
		if t.dim > 0 {
			if w != "" {
				num = append(num, w)
			}
			unum = append(unum, uc)
		} else {
			if sw, ok := singular[t.word]; ok && d == 1 {
				w = sw
			}
			if w != "" { // a count is dimensionless: no word, as in OTel's names
				den = append(den, w)
			}
			uden = append(uden, uc)
		}
	}
	suffix := strings.Join(num, "_")
	if len(den) > 0 {
		if suffix != "" {
			suffix += "_"
		}
		suffix += "per_" + strings.Join(den, "_per_")
	}
	ucum := strings.Join(unum, ".")
	if len(uden) > 0 {
		if ucum == "" {
			ucum = "1"
		}
		ucum += "/" + strings.Join(uden, "/")
	}
	if ucum == "" {
		ucum = "1"
	}
	res.Scale = res.Mul / res.Div
	res.Suffix, res.UCUM = suffix, ucum
	return res
}

func abs8(x int8) int8 {
	if x < 0 {
		return -x
	}
	return x
}

// appendSuffix appends "_"+suffix to name unless name already ends with it.
// When name ends with a leading part of the suffix ("read_bytes" and
// "bytes_per_second"), only the rest is appended ("read_bytes_per_second").
func appendSuffix(name, suffix string) string {
	if suffix == "" {
		return name
	}
	words := strings.Split(suffix, "_")
	for k := len(words); k >= 1; k-- {
		head := strings.Join(words[:k], "_")
		if name == head || strings.HasSuffix(name, "_"+head) {
			if k == len(words) {
				return name
			}
			return name + "_" + strings.Join(words[k:], "_")
		}
	}
	return name + "_" + suffix
}

package semantics

// Scale is the conversion of values from one pmUnits to another as libpcp's
// pmConvScale computes it (src/libpcp/src/units.c): the integer factors
// Mult and Div, reduced to Mult/1 when Div divides Mult. Convert applies
// them in the arithmetic of the value's type.
type Scale struct{ Mult, Div int64 }

// ScaleOf returns pmConvScale's factors from units from to units to, or
// ErrConv when their dimensions differ and ErrUnit for a space scale above
// Ebyte or a time scale above hour. As in libpcp, units without dimension
// are a count, and the factors are products in int64 that wrap around when
// the powers are large; a divisor that wraps to 0 (where libpcp divides by
// zero) is ErrConv. Units of PCP 7.2's extra kinds must be the same kind;
// their scales are not converted (ErrUnit when they differ).
func ScaleOf(from, to Units) (Scale, error) {
	if from.IsNone() {
		from.DimCount = 1
	}
	if to.IsNone() {
		to.DimCount = 1
	}
	if from.DimSpace != to.DimSpace || from.DimTime != to.DimTime || from.DimCount != to.DimCount || from.ExtraUnit != to.ExtraUnit {
		return Scale{}, ErrConv
	}
	if from.ExtraUnit != 0 && from.ExtraScale != to.ExtraScale {
		return Scale{}, ErrUnit
	}
	mult, div := int64(1), int64(1)
	power := func(dim int8, d, m int64) {
		for k := int8(0); k < dim; k++ {
			div *= d
			mult *= m
		}
		for k := dim; k < 0; k++ {
			mult *= d
			div *= m
		}
	}
	if from.DimSpace != 0 {
		// from and to each relative to the canonical Mbyte
		if from.ScaleSpace > SpaceEByte || to.ScaleSpace > SpaceEByte {
			return Scale{}, ErrUnit
		}
		d, m := toMbyte(from.ScaleSpace)
		od, om := toMbyte(to.ScaleSpace)
		power(from.DimSpace, d*om, m*od)
	}
	if from.DimTime != 0 {
		if from.ScaleTime > TimeHour || to.ScaleTime > TimeHour {
			return Scale{}, ErrUnit
		}
		d, m := toSec(from.ScaleTime)
		od, om := toSec(to.ScaleTime)
		power(from.DimTime, d*om, m*od)
	}
	if from.DimCount != 0 || (from.DimSpace == 0 && from.DimTime == 0) {
		d, m := int64(1), int64(1)
		for k := from.ScaleCount; k < 0; k++ {
			d *= 10
		}
		for k := int8(0); k < from.ScaleCount; k++ {
			m *= 10
		}
		for k := to.ScaleCount; k < 0; k++ {
			m *= 10
		}
		for k := int8(0); k < to.ScaleCount; k++ {
			d *= 10
		}
		if from.DimCount == 0 {
			// extra units only: libpcp takes the count scales' factors as
			// they are, dropping those of space and time
			mult, div = m, d
		} else {
			power(from.DimCount, d, m)
		}
	}
	if div == 0 {
		return Scale{}, ErrConv
	}
	if mult%div == 0 {
		mult /= div
		div = 1
	}
	return Scale{Mult: mult, Div: div}, nil
}

// toMbyte returns the divisor and multiplier from space scale s to Mbyte.
func toMbyte(s uint8) (d, m int64) {
	if s < SpaceMByte {
		return 1 << (10 * (SpaceMByte - s)), 1
	}
	return 1, 1 << (10 * (s - SpaceMByte))
}

// toSec returns the divisor and multiplier from time scale s to seconds.
func toSec(s uint8) (d, m int64) {
	switch s {
	case TimeNSec:
		return 1000000000, 1
	case TimeUSec:
		return 1000000, 1
	case TimeMSec:
		return 1000, 1
	case TimeMin:
		return 1, 60
	case TimeHour:
		return 1, 3600
	}
	return 1, 1
}

// Convert converts v as pmConvScale does for v's type: integers as
// (v*Mult + Div/2) / Div in 64-bit arithmetic (signed but for U64, which
// wraps, truncating toward zero, then cast back to 32 bits for 32 and
// U32), FLOAT as v * (float(Mult)/float(Div)) in single precision, DOUBLE
// as v * (double(Mult)/double(Div)). Other types are ErrConv.
func (s Scale) Convert(v Value) (Value, error) {
	switch v.typ {
	case Type32:
		return Int32Value(int32((int64(int32(v.bits))*s.Mult + s.Div/2) / s.Div)), nil
	case TypeU32:
		return Uint32Value(uint32((int64(uint32(v.bits))*s.Mult + s.Div/2) / s.Div)), nil
	case Type64:
		return Int64Value((int64(v.bits)*s.Mult + s.Div/2) / s.Div), nil
	case TypeU64:
		return Uint64Value((v.bits*uint64(s.Mult) + uint64(s.Div/2)) / uint64(s.Div)), nil
	case TypeFloat:
		return FloatValue(v.Float32() * (float32(s.Mult) / float32(s.Div))), nil
	case TypeDouble:
		return DoubleValue(v.Float64() * (float64(s.Mult) / float64(s.Div))), nil
	}
	return v, ErrConv
}

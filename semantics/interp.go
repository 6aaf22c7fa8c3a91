package semantics

import "math"

// InterpRule selects how INSTANT and DISCRETE values between two
// observations are chosen when replaying an archive at arbitrary times.
type InterpRule int

const (
	// InterpNearest is libpcp's rule since PCP 6.3.2: the observation
	// closest in time, an exact midpoint going to the earlier one.
	InterpNearest InterpRule = iota
	// InterpPrior is the rule of PCP 6.3.1 and earlier: always the
	// observation at or before the requested time.
	InterpPrior
)

// String returns "nearest" or "prior".
func (r InterpRule) String() string {
	if r == InterpPrior {
		return "prior"
	}
	return "nearest"
}

// BoundKind is the state of an interpolation bound (libpcp interp.c's
// s_prior / s_next): no record found, a value, or a <mark> record.
type BoundKind uint8

// Bound kinds.
const (
	BoundUndefined BoundKind = iota // no record found on this side
	BoundValue                      // a value
	BoundMark                       // a <mark> record: no value across it
)

// Bound is the observation of one metric instance on one side of a
// requested time. T is in seconds from the archive start as a double, the
// way libpcp measures every time it compares.
type Bound struct {
	Kind BoundKind
	T    float64
	V    Value
}

// Interpolate answers the value of one metric instance at tReq (seconds
// from the archive start) from its prior bound (latest record at or before
// tReq holding the instance or a mark) and next bound (earliest record at or
// after tReq), following libpcp's __pmLogFetchInterp: availability by
// semantics (DISCRETE needs a prior value only; INSTANT and COUNTER need
// values on both sides; a mark on a needed side means no value), exact
// observations without arithmetic, INSTANT/DISCRETE by rule, COUNTER linear
// with libpcp's integer rounding, strings and aggregates always the prior
// value. ok is false when there is no value.
//
// A COUNTER of a non-arithmetic type has no value here; libpcp fails the
// whole value set with PM_ERR_TYPE, which the caller reports.
func Interpolate(typ Type, sem Sem, rule InterpRule, prior, next *Bound, tReq float64) (v Value, ok bool) {
	if prior.Kind != BoundValue || prior.T > tReq {
		return Value{}, false
	}
	nextOK := next.Kind == BoundValue && next.T >= tReq
	if sem != SemDiscrete && !nextOK {
		return Value{}, false
	}
	if prior.T == tReq {
		return prior.V, true
	}
	if nextOK && next.T == tReq {
		return next.V, true
	}
	if !typ.IsNumeric() {
		// STRING, AGGREGATE, EVENT: the prior value, whatever the rule.
		if sem == SemCounter {
			return Value{}, false
		}
		return prior.V, true
	}
	switch sem {
	case SemDiscrete:
		if rule == InterpPrior || !nextOK || tReq <= (prior.T+next.T)/2 {
			return prior.V, true
		}
		return next.V, true
	case SemCounter:
		return InterpCounter(typ, prior.V, next.V, tReq-prior.T, next.T-prior.T), true
	default: // INSTANT and anything else
		if rule == InterpPrior || tReq <= (prior.T+next.T)/2 {
			return prior.V, true
		}
		return next.V, true
	}
}

// InterpCounter interpolates a counter linearly between prior and next
// values of type typ, dt seconds after prior, span seconds between them, with
// libpcp's arithmetic (interp.c, PCP_COUNTER_WRAP unset): 32 and U32 in
// double then +0.5 and truncation as C converts (INT_MIN when out of range);
// 64 and U64 through the difference converted to double, +0.5 and
// truncation (precision lost beyond 2^53; U64 bounds signed as in libpcp);
// FLOAT with the difference in float and the rest in double as C promotes it, DOUBLE unrounded. A
// decreasing counter is interpolated downwards.
func InterpCounter(typ Type, prior, next Value, dt, span float64) Value {
	switch typ {
	case Type32:
		p, n := int32(prior.Int64()), int32(next.Int64())
		diff := n - p // C int arithmetic wraps on overflow
		f := 0.5 + float64(p) + dt*float64(diff)/span
		return Int32Value(cTrunc32(f))
	case TypeU32:
		p, n := uint32(prior.Uint64()), uint32(next.Uint64())
		var f float64
		if n >= p {
			f = 0.5 + float64(p) + dt*float64(n-p)/span
		} else {
			f = 0.5 + float64(p) - dt*float64(p-n)/span
		}
		return Uint32Value(uint32(cTruncU64(f)))
	case Type64:
		p, n := prior.Int64(), next.Int64()
		diff := n - p
		f := 0.5 + float64(p) + dt*float64(diff)/span
		return Int64Value(cTrunc64(f))
	case TypeU64:
		// libpcp holds U64 bounds in signed 64-bit variables: the
		// comparison and the conversion of the prior value to double are
		// signed (so values near 2^64 stay exact), the difference unsigned.
		p, n := prior.Int64(), next.Int64()
		var f float64
		if n >= p {
			f = 0.5 + float64(p) + dt*float64(uint64(n)-uint64(p))/span
		} else {
			f = 0.5 + float64(p) - dt*float64(uint64(p)-uint64(n))/span
		}
		return Uint64Value(cTruncU64(f))
	case TypeFloat:
		p, n := prior.Float32(), next.Float32()
		diff := n - p // float arithmetic, as in C
		return FloatValue(float32(float64(p) + dt*float64(diff)/span))
	case TypeDouble:
		p, n := prior.Float64(), next.Float64()
		return DoubleValue(p + dt*(n-p)/span)
	}
	return prior
}

// cTrunc64 converts like a C cast of a double to int64 on x86-64: truncation
// toward zero, and the "integer indefinite" value for NaN and out of range.
func cTrunc64(f float64) int64 {
	if math.IsNaN(f) || f >= 9223372036854775808.0 || f < -9223372036854775808.0 {
		return math.MinInt64
	}
	return int64(f)
}

// cTrunc32 converts like a C assignment of a double to int (x86-64
// cvttsd2si: INT_MIN for NaN and out of range).
func cTrunc32(f float64) int32 {
	if math.IsNaN(f) || f >= 2147483648.0 || f <= -2147483649.0 {
		return math.MinInt32
	}
	return int32(f)
}

// cTruncU64 converts like a C cast of a double to uint64 (gcc on x86-64:
// values at or above 2^63 are offset before the signed conversion).
func cTruncU64(f float64) uint64 {
	if math.IsNaN(f) || f < 0 {
		return uint64(cTrunc64(f))
	}
	if f >= 18446744073709551616.0 {
		return 1 << 63
	}
	if f >= 9223372036854775808.0 {
		return uint64(int64(f-9223372036854775808.0)) ^ (1 << 63)
	}
	return uint64(int64(f))
}

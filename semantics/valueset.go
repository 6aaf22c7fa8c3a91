package semantics

import (
	"bytes"
	"encoding/binary"
	"math"
)

// SetNumeric makes v a numeric value of type t whose 64-bit word is bits (as
// Bits returns it: sign-extended for 32 and 64, the IEEE bits for FLOAT and
// DOUBLE). It writes v in place, for decoders that fill reused slices without
// building temporaries.
func (v *Value) SetNumeric(t Type, bits uint64) {
	v.typ = t
	v.bits = bits
	if v.p != nil {
		v.p, v.n = nil, 0
	}
}

// SetBytes makes v a STRING, AGGREGATE or EVENT value of type t referencing
// b without copying it, in place.
func (v *Value) SetBytes(t Type, b []byte) {
	v.typ = t
	v.bits = 0
	v.p, v.n = bytesOf(b)
}

// The value sets of pmcd's fetch results and of v3 archive records share a
// layout (pmValueSet): {inst, value} pairs whose value is either the datum
// itself (PM_VAL_INSITU) or a pointer to a pmValueBlock. InsituValue and
// BlockValue decode one value of either form; the walk over the sets is
// internal/pcpwire's (pointers are relative to different starts: its
// Blocks says where).

// Value formats of a pmValueSet (PM_VAL_*).
const (
	ValInsitu = 0 // the value is the 32-bit word itself
	ValDptr   = 1 // a pointer to a pmValueBlock (dynamic in libpcp)
	ValSptr   = 2 // a pointer to a pmValueBlock (static in libpcp)
)

// InsituValue decodes the 32-bit word of an INSITU value of a metric of type
// t (32 or U32; ancient archives also stored FLOAT this way).
func InsituValue(t Type, w uint32) Value {
	switch t {
	case TypeU32:
		return Uint32Value(w)
	case TypeFloat: // ancient archives
		return FloatValue(math.Float32frombits(w))
	case Type64:
		return Int64Value(int64(int32(w)))
	case TypeU64:
		return Uint64Value(uint64(w))
	case TypeDouble:
		return DoubleValue(float64(int32(w)))
	}
	return Int32Value(int32(w))
}

// BlockValue decodes the payload of a pmValueBlock (big-endian numbers; a
// STRING up to its NUL; other types as opaque bytes referenced without a
// copy). ok is false when the payload is too short for t.
func BlockValue(t Type, b []byte) (v Value, ok bool) {
	switch t {
	case Type32, TypeU32, TypeFloat:
		if len(b) < 4 {
			return Value{}, false
		}
		w := binary.BigEndian.Uint32(b)
		switch t {
		case Type32:
			return Int32Value(int32(w)), true
		case TypeU32:
			return Uint32Value(w), true
		}
		return FloatValue(math.Float32frombits(w)), true
	case Type64, TypeU64, TypeDouble:
		if len(b) < 8 {
			return Value{}, false
		}
		w := binary.BigEndian.Uint64(b)
		switch t {
		case Type64:
			return Int64Value(int64(w)), true
		case TypeU64:
			return Uint64Value(w), true
		}
		return DoubleValue(math.Float64frombits(w)), true
	case TypeString:
		if i := bytes.IndexByte(b, 0); i >= 0 {
			b = b[:i]
		}
		return BytesValue(t, b), true
	}
	return BytesValue(t, b), true
}

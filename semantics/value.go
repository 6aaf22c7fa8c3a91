package semantics

import (
	"math"
	"unsafe"
)

// Value is one typed PCP value (pmAtomValue plus its type). Numeric values are
// held in a 64-bit word with no allocation; STRING, AGGREGATE and EVENT values
// reference a byte slice (a STRING without its NUL terminator). The byte slice
// may alias a reused buffer of the source: copy it (Clone) to keep it.
//
// A Value is 24 bytes: decoders write millions of them per archive, so the
// payload is held as its first byte and length rather than a slice.
type Value struct {
	typ  Type
	n    uint32 // payload length
	bits uint64
	p    *byte // payload (nil: none)
}

// bytesOf makes the payload fields of b.
func bytesOf(b []byte) (*byte, uint32) {
	if b == nil {
		return nil, 0
	}
	return unsafe.SliceData(b), uint32(len(b))
}

// Int32Value returns a PM_TYPE_32 value.
func Int32Value(v int32) Value { return Value{typ: Type32, bits: uint64(int64(v))} }

// Uint32Value returns a PM_TYPE_U32 value.
func Uint32Value(v uint32) Value { return Value{typ: TypeU32, bits: uint64(v)} }

// Int64Value returns a PM_TYPE_64 value.
func Int64Value(v int64) Value { return Value{typ: Type64, bits: uint64(v)} }

// Uint64Value returns a PM_TYPE_U64 value.
func Uint64Value(v uint64) Value { return Value{typ: TypeU64, bits: v} }

// FloatValue returns a PM_TYPE_FLOAT value (kept as float32).
func FloatValue(v float32) Value { return Value{typ: TypeFloat, bits: uint64(math.Float32bits(v))} }

// DoubleValue returns a PM_TYPE_DOUBLE value.
func DoubleValue(v float64) Value { return Value{typ: TypeDouble, bits: math.Float64bits(v)} }

// StringValue returns a PM_TYPE_STRING value.
func StringValue(s string) Value {
	p, n := bytesOf([]byte(s))
	return Value{typ: TypeString, p: p, n: n}
}

// BytesValue returns a value of type t (STRING, AGGREGATE or EVENT) that
// references b without copying it.
func BytesValue(t Type, b []byte) Value {
	p, n := bytesOf(b)
	return Value{typ: t, p: p, n: n}
}

// Type returns the value's PCP type.
func (v Value) Type() Type { return v.typ }

// Int64 returns a signed integer value (32 and 64); other numeric types are
// converted as C would.
func (v Value) Int64() int64 {
	switch v.typ {
	case Type32, Type64, TypeU32, TypeU64:
		return int64(v.bits)
	case TypeFloat:
		return int64(v.Float32())
	case TypeDouble:
		return int64(math.Float64frombits(v.bits))
	}
	return 0
}

// Uint64 returns an unsigned integer value (u32 and u64) exactly.
func (v Value) Uint64() uint64 {
	switch v.typ {
	case TypeFloat:
		return uint64(v.Float32())
	case TypeDouble:
		return uint64(math.Float64frombits(v.bits))
	}
	return v.bits
}

// Float32 returns a FLOAT value.
func (v Value) Float32() float32 { return math.Float32frombits(uint32(v.bits)) }

// Float64 returns any numeric value converted to float64 (as pmExtractValue to
// PM_TYPE_DOUBLE does); 0 for non-numeric types.
func (v Value) Float64() float64 {
	switch v.typ {
	case Type32, Type64:
		return float64(int64(v.bits))
	case TypeU32, TypeU64:
		return float64(v.bits)
	case TypeFloat:
		return float64(v.Float32())
	case TypeDouble:
		return math.Float64frombits(v.bits)
	}
	return 0
}

// Bytes returns the payload of a STRING, AGGREGATE or EVENT value.
func (v Value) Bytes() []byte {
	if v.p == nil {
		return nil
	}
	return unsafe.Slice(v.p, v.n)
}

// Str returns a STRING value as a Go string (this allocates).
func (v Value) Str() string { return string(v.Bytes()) }

// Bits returns the raw 64-bit word of a numeric value.
func (v Value) Bits() uint64 { return v.bits }

// Clone returns v with its byte payload copied, safe to keep after the source
// reuses its buffers.
func (v Value) Clone() Value {
	if v.p != nil {
		v.p, v.n = bytesOf(append([]byte(nil), v.Bytes()...))
	}
	return v
}

// Equal reports whether two values have the same type and identical contents
// (bit-wise for floats).
func (v Value) Equal(o Value) bool {
	return v.typ == o.typ && v.bits == o.bits && string(v.Bytes()) == string(o.Bytes())
}

package semantics

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

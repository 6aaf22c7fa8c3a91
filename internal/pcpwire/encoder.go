package pcpwire

import "encoding/binary"

// HeaderSize is the size of a PDU's header: its length, its type and the
// sender (0 for a client).
const HeaderSize = 12

// Encoder appends request PDUs to a reused buffer.
type Encoder struct {
	// B holds the PDUs encoded since it was last emptied.
	B     []byte
	start int
}

// Reset empties the buffer, keeping its memory.
func (e *Encoder) Reset() { e.B = e.B[:0] }

// Begin starts a PDU of type typ; Finish ends it.
func (e *Encoder) Begin(typ uint32) {
	e.start = len(e.B)
	e.B = binary.BigEndian.AppendUint32(e.B, 0)
	e.B = binary.BigEndian.AppendUint32(e.B, typ)
	e.B = binary.BigEndian.AppendUint32(e.B, 0)
}

// U32 appends a 32-bit word.
func (e *Encoder) U32(v uint32) { e.B = binary.BigEndian.AppendUint32(e.B, v) }

// Raw appends bytes as they are (unpadded, as libpcp sends an ATTR's).
func (e *Encoder) Raw(b []byte) { e.B = append(e.B, b...) }

// Str appends a length-prefixed string padded to 4 bytes with '~', as
// libpcp pads the names of a PMNS_NAMES request.
func (e *Encoder) Str(s string) {
	e.U32(uint32(len(s)))
	e.B = append(e.B, s...)
	for len(e.B)%4 != 0 {
		e.B = append(e.B, '~')
	}
}

// Finish fills in the length of the PDU begun last.
func (e *Encoder) Finish() {
	binary.BigEndian.PutUint32(e.B[e.start:], uint32(len(e.B)-e.start))
}

package pcpwire

import (
	"encoding/binary"
	"fmt"
)

// Error is a field that breaks the encoding: its byte offset (from the
// start the decoder was given, see NewDecoder's base) and what is wrong.
type Error struct {
	Offset int64
	Msg    string
}

// Error names the offset and the fault.
func (e *Error) Error() string { return fmt.Sprintf("byte %d: %s", e.Offset, e.Msg) }

// Decoder reads fields from a buffer held in memory with a sticky error:
// after the first failure every read returns zero (nil for bytes) and Err
// says where decoding failed. A Decoder is a value: made on the stack, it
// allocates only its error.
type Decoder struct {
	b    []byte
	pos  int
	base int64  // offset of b[0] in what errors name
	unit string // what b is, for errors ("PDU", "record", "file")
	// little reads little-endian fields (the host's order, for MMV)
	little bool
	err    *Error
}

// NewDecoder decodes the big-endian fields of b (PCP's wire and archive
// encoding). Offsets in errors are base plus the offset in b; unit names b
// in errors ("PDU", "record").
func NewDecoder(b []byte, base int64, unit string) Decoder {
	return Decoder{b: b, base: base, unit: unit}
}

// NewHostDecoder decodes the fields of b in the host's byte order, as MMV
// files hold them.
func NewHostDecoder(b []byte, base int64, unit string) Decoder {
	return Decoder{b: b, base: base, unit: unit, little: hostLittle}
}

var hostLittle = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// Err is the first failure, an *Error, or nil.
func (d *Decoder) Err() error {
	if d.err == nil {
		return nil
	}
	return d.err
}

// Buf is the buffer decoded.
func (d *Decoder) Buf() []byte { return d.b }

// Pos is the offset in the buffer of the next field.
func (d *Decoder) Pos() int { return d.pos }

// Left is how many bytes follow the position.
func (d *Decoder) Left() int { return len(d.b) - d.pos }

// Fail records a failure at offset at of the buffer (unless one is
// recorded already) and moves to the end.
func (d *Decoder) Fail(at int, format string, args ...any) {
	d.failAt(d.base+int64(at), format, args...)
}

func (d *Decoder) failAt(off int64, format string, args ...any) {
	if d.err == nil {
		d.err = &Error{Offset: off, Msg: fmt.Sprintf(format, args...)}
	}
	d.pos = len(d.b)
}

// Seek moves to offset off of the buffer (an offset read from the buffer
// itself, for formats of sections and pointers).
func (d *Decoder) Seek(off uint64) {
	if d.err != nil {
		return
	}
	if off > uint64(len(d.b)) {
		d.failAt(d.base+int64(min(off, 1<<62)), "offset %d past the end of the %d-byte %s", off, len(d.b), d.unit)
		return
	}
	d.pos = int(off)
}

// has checks that n bytes follow the position.
func (d *Decoder) has(n int) bool {
	if d.err != nil {
		return false
	}
	if len(d.b)-d.pos < n {
		d.Fail(d.pos, "%s too short (need %d bytes, %d left)", d.unit, n, len(d.b)-d.pos)
		return false
	}
	return true
}

// U32 reads a 32-bit word.
func (d *Decoder) U32() uint32 {
	if !d.has(4) {
		return 0
	}
	w := d.b[d.pos : d.pos+4]
	d.pos += 4
	if d.little {
		return binary.LittleEndian.Uint32(w)
	}
	return binary.BigEndian.Uint32(w)
}

// I32 reads a signed 32-bit word.
func (d *Decoder) I32() int32 { return int32(d.U32()) }

// U64 reads a 64-bit word.
func (d *Decoder) U64() uint64 {
	if !d.has(8) {
		return 0
	}
	w := d.b[d.pos : d.pos+8]
	d.pos += 8
	if d.little {
		return binary.LittleEndian.Uint64(w)
	}
	return binary.BigEndian.Uint64(w)
}

// I64 reads a signed 64-bit word.
func (d *Decoder) I64() int64 { return int64(d.U64()) }

// Bytes reads n bytes (a slice of the buffer, not a copy).
func (d *Decoder) Bytes(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b)-d.pos {
		d.Fail(d.pos, "length %d exceeds the %d bytes left in the %s", n, len(d.b)-d.pos, d.unit)
		return nil
	}
	v := d.b[d.pos : d.pos+n : d.pos+n]
	d.pos += n
	return v
}

// Skip moves past n bytes.
func (d *Decoder) Skip(n int) { d.Bytes(n) }

// Pad moves to the next 4-byte boundary of the buffer, or to its end when
// it ends before (pmcd leaves the padding of a PDU's last string out).
func (d *Decoder) Pad() {
	if d.err == nil {
		d.pos = min((d.pos+3)&^3, len(d.b))
	}
}

// Count reads a signed 32-bit count of items of at least size bytes each,
// which must fit in the bytes that follow it: an allocation of count
// items is bounded by the buffer's size. what names the count in errors;
// a failure is at the count's offset.
func (d *Decoder) Count(size int, what string) int {
	at := d.pos
	n := d.I32()
	if d.err != nil {
		return 0
	}
	if n < 0 || int64(n)*int64(size) > int64(len(d.b)-d.pos) {
		d.Fail(at, "%s %d does not fit in the %d bytes left", what, n, len(d.b)-at)
		return 0
	}
	return int(n)
}

// End checks that the buffer was read to its end, and returns Err.
func (d *Decoder) End() error {
	if d.err == nil && d.pos != len(d.b) {
		d.Fail(d.pos, "%d unexpected bytes after the end", len(d.b)-d.pos)
	}
	return d.Err()
}

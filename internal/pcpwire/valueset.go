package pcpwire

import (
	"encoding/binary"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// ValueSet is the head of one pmValueSet of a pmResult: its metric, the
// count of its values (negative: a PCP error code for the metric), their
// format (semantics.ValInsitu, ValDptr, ValSptr) and their undecoded
// {instance, value} pairs of 8 bytes.
type ValueSet struct {
	PMID   semantics.PMID
	NumVal int32
	ValFmt uint32
	// Pairs are the NumVal pairs (none unless NumVal > 0), at offset
	// PairsAt of the buffer.
	Pairs   []byte
	PairsAt int
}

// ValueSet reads the head of value set i of a result's n at the position
// into vs, and moves past its pairs (value blocks lie after the sets: see
// Values).
func (d *Decoder) ValueSet(vs *ValueSet, i, n int) {
	b := d.b[d.pos:]
	if d.err != nil || len(b) < 8 {
		*vs = ValueSet{}
		if d.err == nil {
			d.Fail(d.pos, "value set %d of %d truncated", i, n)
		}
		return
	}
	vs.PMID = semantics.PMID(binary.BigEndian.Uint32(b))
	vs.NumVal = int32(binary.BigEndian.Uint32(b[4:]))
	if vs.NumVal <= 0 {
		vs.ValFmt, vs.Pairs, vs.PairsAt = 0, nil, 0
		d.pos += 8
		return
	}
	if int(vs.NumVal) > (len(b)-12)/8 {
		d.Fail(d.pos+4, "numval %d of %s does not fit in the %s", vs.NumVal, vs.PMID, d.unit)
		*vs = ValueSet{}
		return
	}
	vs.ValFmt = binary.BigEndian.Uint32(b[8:])
	vs.PairsAt = d.pos + 12
	vs.Pairs = b[12 : 12+8*int(vs.NumVal)]
	d.pos = vs.PairsAt + len(vs.Pairs)
}

// Blocks says where the value blocks of a buffer lie: a pair's pointer p
// (in 4-byte words) is the block at byte 4p+Shift of the buffer, which
// must start within [Lo, len-4]. Ordered requires each block to start
// after the one before (of the whole result: a Blocks is used for one
// buffer), as pmcd lays them out: overlapping blocks would let a small
// buffer cost a decoding time quadratic in its size.
type Blocks struct {
	Shift   int
	Lo      int
	Ordered bool
	end     int
}

// Block checks the value block of pair j of vs and returns its header
// (type in the top byte, length with the header in the low 24 bits) and
// its offset in the buffer; a failure is recorded in d and gives 0, -1.
func (d *Decoder) Block(vs *ValueSet, j int, bl *Blocks) (hdr uint32, at int) {
	if d.err != nil {
		return 0, -1
	}
	bo := int(binary.BigEndian.Uint32(vs.Pairs[8*j+4:]))*4 + bl.Shift
	if bo < bl.Lo || bo > len(d.b)-4 {
		d.Fail(vs.PairsAt+8*j+4, "value block offset %d of %s outside the %s", bo, vs.PMID, d.unit)
		return 0, -1
	}
	if bl.Ordered && bo < bl.end {
		d.Fail(vs.PairsAt+8*j+4, "value block offset %d of %s overlaps the block before, ending at %d", bo, vs.PMID, bl.end)
		return 0, -1
	}
	hdr = binary.BigEndian.Uint32(d.b[bo:])
	vlen := int(hdr & 0xffffff)
	if vlen < 4 || vlen > len(d.b)-bo {
		d.Fail(bo, "value block length %d of %s outside the %s", vlen, vs.PMID, d.unit)
		return 0, -1
	}
	bl.end = bo + vlen
	return hdr, bo
}

// Values decodes the first len(dst) values of vs into dst (len(dst) at
// most vs.NumVal): words in place as type t, or value blocks located by bl
// as the type each block names. Numbers are held in dst; other values
// reference the buffer. A failure is recorded in d.
func (d *Decoder) Values(dst []source.InstValue, vs *ValueSet, t semantics.Type, bl *Blocks) {
	if d.err != nil {
		return
	}
	switch vs.ValFmt {
	case semantics.ValInsitu:
		Insitu(dst, vs.Pairs, t)
	case semantics.ValDptr, semantics.ValSptr:
		// Block's checks, inline: this is the steady fetch's loop
		b, pairs, end := d.b, vs.Pairs[:8*len(dst)], bl.end
		for j := range dst {
			w := pairs[8*j : 8*j+8]
			bo := int(binary.BigEndian.Uint32(w[4:]))*4 + bl.Shift
			if bo < bl.Lo || bo > len(b)-4 || bl.Ordered && bo < end {
				bl.end = end
				d.Block(vs, j, bl) // records the failure
				return
			}
			hdr := binary.BigEndian.Uint32(b[bo:])
			vlen := int(hdr & 0xffffff)
			if vlen < 4 || vlen > len(b)-bo {
				bl.end = end
				d.Block(vs, j, bl)
				return
			}
			end = bo + vlen
			bt := semantics.Type(hdr >> 24)
			v := &dst[j]
			v.Inst = int32(binary.BigEndian.Uint32(w))
			if (bt == semantics.TypeU64 || bt == semantics.Type64 || bt == semantics.TypeDouble) && vlen >= 12 {
				v.Value.SetNumeric(bt, binary.BigEndian.Uint64(b[bo+4:]))
				continue
			}
			val, ok := semantics.BlockValue(bt, b[bo+4:end])
			if !ok {
				d.Fail(bo, "value block of %d bytes too short for type %s of %s", vlen-4, bt, vs.PMID)
				return
			}
			v.Value = val
		}
		bl.end = end
	default:
		d.Fail(vs.PairsAt-4, "unknown value format %d of %s", vs.ValFmt, vs.PMID)
	}
}

// Insitu decodes the first len(dst) {instance, word} pairs of pairs, whose
// words are values of type t held in place.
func Insitu(dst []source.InstValue, pairs []byte, t semantics.Type) {
	switch t {
	case semantics.TypeU32:
		for j := range dst {
			w := pairs[8*j : 8*j+8]
			v := &dst[j]
			v.Inst = int32(binary.BigEndian.Uint32(w))
			v.Value.SetNumeric(semantics.TypeU32, uint64(binary.BigEndian.Uint32(w[4:])))
		}
	case semantics.Type32:
		for j := range dst {
			w := pairs[8*j : 8*j+8]
			v := &dst[j]
			v.Inst = int32(binary.BigEndian.Uint32(w))
			v.Value.SetNumeric(semantics.Type32, uint64(int64(int32(binary.BigEndian.Uint32(w[4:])))))
		}
	default:
		for j := range dst {
			w := pairs[8*j : 8*j+8]
			dst[j] = source.InstValue{Inst: int32(binary.BigEndian.Uint32(w)), Value: semantics.InsituValue(t, binary.BigEndian.Uint32(w[4:]))}
		}
	}
}

// Errors hands out one error per PCP error code, made the first time the
// code is seen, so that a value set's error costs no allocation per set.
type Errors map[int32]error

// Of returns the error of code.
func (m *Errors) Of(code int32) error {
	if e, ok := (*m)[code]; ok {
		return e
	}
	if *m == nil {
		*m = Errors{}
	}
	e := error(semantics.PMError(code))
	(*m)[code] = e
	return e
}

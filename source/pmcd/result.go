package pmcd

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// resultDecoder decodes fetch replies into reused storage: after the first
// fetch of a metric set, decoding allocates nothing.
type resultDecoder struct {
	peer   string
	vals   []source.InstValue
	starts []int
	errs   map[int32]error
	// limit bounds the values decoded in a fetch (0: none); cut counts
	// those left out by it.
	limit int
	cut   int
}

// errOf returns the error of a code, made once per code.
func (r *resultDecoder) errOf(code int32) error {
	if e, ok := r.errs[code]; ok {
		return e
	}
	if r.errs == nil {
		r.errs = map[int32]error{}
	}
	e := error(semantics.PMError(code))
	r.errs[code] = e
	return e
}

// decode appends the value sets of a RESULT or HIGHRES_RESULT reply to the
// fetch of pmids (whose INSITU values are of types) to sets, and returns
// the reply's timestamp. Values are stored in r.vals; call link once every
// reply of a fetch is decoded.
func (r *resultDecoder) decode(p pdu, pmids []semantics.PMID, types []semantics.Type, sets []source.ValueSet) ([]source.ValueSet, time.Time, error) {
	b := p.b
	fail := func(at int, format string, args ...any) error {
		return &FormatError{Peer: r.peer, PDU: pduName(p.typ), Offset: at, Msg: fmt.Sprintf(format, args...)}
	}
	var ts time.Time
	var np, pos, npAt int
	switch p.typ {
	case pduHighresResult:
		if len(b) < 32 {
			return sets, ts, fail(len(b), "truncated header: %d bytes", len(b))
		}
		np, npAt = int(int32(binary.BigEndian.Uint32(b[12:]))), 12
		ts = time.Unix(int64(binary.BigEndian.Uint64(b[16:])), int64(binary.BigEndian.Uint64(b[24:])))
		pos = 32
	case pduResult:
		if len(b) < 24 {
			return sets, ts, fail(len(b), "truncated header: %d bytes", len(b))
		}
		ts = time.Unix(int64(int32(binary.BigEndian.Uint32(b[12:]))), int64(int32(binary.BigEndian.Uint32(b[16:])))*1000)
		np, npAt = int(int32(binary.BigEndian.Uint32(b[20:]))), 20
		pos = 24
	default:
		return sets, ts, fail(4, "not a fetch result")
	}
	blockEnd := 0
	if np != len(pmids) {
		return sets, ts, fail(npAt, "numpmid %d for %d metrics asked for", np, len(pmids))
	}
	for i := 0; i < np; i++ {
		if len(b)-pos < 8 {
			return sets, ts, fail(pos, "value set %d of %d truncated", i, np)
		}
		pmid := semantics.PMID(binary.BigEndian.Uint32(b[pos:]))
		numval := int32(binary.BigEndian.Uint32(b[pos+4:]))
		if pmid != pmids[i] {
			return sets, ts, fail(pos, "value set %d is of %s, %s was asked for", i, pmid, pmids[i])
		}
		pos += 8
		r.starts = append(r.starts, len(r.vals))
		vs := source.ValueSet{PMID: pmid}
		if numval < 0 {
			vs.Err = r.errOf(numval)
			sets = append(sets, vs)
			continue
		}
		if numval == 0 {
			sets = append(sets, vs)
			continue
		}
		if int(numval) > (len(b)-pos-4)/8 {
			return sets, ts, fail(pos-4, "numval %d of %s does not fit in the PDU", numval, pmid)
		}
		valfmt := binary.BigEndian.Uint32(b[pos:])
		pos += 4
		all := int(numval)
		nv := all
		if r.limit > 0 && len(r.vals)+nv > r.limit {
			nv = max(0, r.limit-len(r.vals))
			r.cut += all - nv
		}
		base := len(r.vals)
		if cap(r.vals)-base < nv {
			nvals := make([]source.InstValue, base, 2*cap(r.vals)+nv)
			copy(nvals, r.vals)
			r.vals = nvals
		}
		r.vals = r.vals[:base+nv]
		dst := r.vals[base:]
		vl := b[pos : pos+8*all]
		switch valfmt {
		case semantics.ValInsitu:
			t := types[i]
			for j := range dst {
				w := vl[8*j:]
				dst[j].Inst = int32(binary.BigEndian.Uint32(w))
				dst[j].Value = semantics.InsituValue(t, binary.BigEndian.Uint32(w[4:]))
			}
		case semantics.ValDptr, semantics.ValSptr:
			for j := range dst {
				w := vl[8*j:]
				bo := int(binary.BigEndian.Uint32(w[4:])) * 4
				if bo < 32 || bo > len(b)-4 || bo < 0 {
					return sets, ts, fail(pos+8*j+4, "value block offset %d of %s outside the PDU", bo, pmid)
				}
				// pmcd appends the blocks in value order, each after the
				// last: blocks overlapping would let a small PDU cost a
				// decoding time quadratic in its size
				if bo < blockEnd {
					return sets, ts, fail(pos+8*j+4, "value block offset %d of %s overlaps the block before, ending at %d", bo, pmid, blockEnd)
				}
				hdr := binary.BigEndian.Uint32(b[bo:])
				vlen := int(hdr & 0xffffff)
				if vlen < 4 || vlen > len(b)-bo {
					return sets, ts, fail(bo, "value block length %d of %s outside the PDU", vlen, pmid)
				}
				blockEnd = bo + vlen
				v, ok := semantics.BlockValue(semantics.Type(hdr>>24), b[bo+4:bo+vlen])
				if !ok {
					return sets, ts, fail(bo, "value block of %d bytes too short for type %s of %s", vlen-4, semantics.Type(hdr>>24), pmid)
				}
				dst[j].Inst = int32(binary.BigEndian.Uint32(w))
				dst[j].Value = v
			}
		default:
			return sets, ts, fail(pos-4, "unknown value format %d of %s", valfmt, pmid)
		}
		pos += 8 * all
		sets = append(sets, vs)
	}
	return sets, ts, nil
}

// link points each set at its values once all replies are decoded (r.vals
// may have moved while growing).
func (r *resultDecoder) link(sets []source.ValueSet) {
	for i := range sets {
		e := len(r.vals)
		if i+1 < len(r.starts) {
			e = r.starts[i+1]
		}
		sets[i].Values = r.vals[r.starts[i]:e:e]
	}
}

// reset empties the storage for the next fetch.
func (r *resultDecoder) reset() {
	r.vals = r.vals[:0]
	r.starts = r.starts[:0]
	r.cut = 0
}

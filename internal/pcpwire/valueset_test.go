package pcpwire

import (
	"errors"
	"math"
	"testing"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// result is a HIGHRES_RESULT body laid out as docs/pcp-protocol.md §5.3
// gives it: a header of 32 bytes, then the value sets: 60.0.1 with two
// INSITU U32 values, 60.0.2 with an error code, 60.0.3 empty, 60.0.4 with
// a U64 and a STRING in value blocks (offsets in words from the PDU's
// start), the blocks after the last set.
func result() []byte {
	b := be(0, 0x7015, 0, 4, 0, 1, 0, 2)
	b = append(b, be(uint32(semantics.NewPMID(60, 0, 1)), 2, semantics.ValInsitu, 0, 7, 1, 0xffffffff)...)
	b = append(b, be(uint32(semantics.NewPMID(60, 0, 2)), 0xffffcfb4)...) // -12364
	b = append(b, be(uint32(semantics.NewPMID(60, 0, 3)), 0)...)
	b = append(b, be(uint32(semantics.NewPMID(60, 0, 4)), 2, semantics.ValDptr, 0xffffffff, 0, 3, 0)...)
	blocks := len(b)
	b = append(b, be(3<<24|12, 0, 42)...)
	b = append(b, be(6<<24|7)...)
	b = append(b, "ab\x00~"...)
	b[blocks-12+3] = byte(blocks / 4)
	b[blocks-4+3] = byte((blocks + 12) / 4)
	b[3] = byte(len(b))
	return b
}

type decoded struct {
	pmid   semantics.PMID
	numval int32
	vals   []source.InstValue
}

func decodeResult(b []byte, types []semantics.Type) ([]decoded, error) {
	d := NewDecoder(b, 0, "PDU")
	d.Skip(12)
	n := int(d.I32())
	d.Skip(16)
	bl := Blocks{Lo: 32, Ordered: true}
	var out []decoded
	for i := 0; i < n && d.Err() == nil; i++ {
		var vs ValueSet
		d.ValueSet(&vs, i, n)
		r := decoded{pmid: vs.PMID, numval: vs.NumVal}
		if vs.NumVal > 0 {
			r.vals = make([]source.InstValue, vs.NumVal)
			d.Values(r.vals, &vs, types[i%len(types)], &bl)
		}
		out = append(out, r)
	}
	return out, d.Err()
}

func TestValueSets(t *testing.T) {
	sets, err := decodeResult(result(), []semantics.Type{semantics.TypeU32, semantics.Type32, semantics.Type32, semantics.TypeU64})
	if err != nil {
		t.Fatal(err)
	}
	if len(sets) != 4 || sets[1].numval != -12364 || sets[2].numval != 0 || len(sets[2].vals) != 0 {
		t.Fatalf("sets %+v", sets)
	}
	v := sets[0].vals
	if len(v) != 2 || v[0].Inst != 0 || v[0].Value.Uint64() != 7 || v[0].Value.Type() != semantics.TypeU32 || v[1].Inst != 1 || v[1].Value.Uint64() != math.MaxUint32 {
		t.Errorf("INSITU: %+v", v)
	}
	v = sets[3].vals
	if len(v) != 2 || v[0].Inst != -1 || v[0].Value.Type() != semantics.TypeU64 || v[0].Value.Uint64() != 42 || v[1].Inst != 3 || string(v[1].Value.Bytes()) != "ab" {
		t.Errorf("blocks: %+v", v)
	}
	// a set decoded into a shorter buffer (a series limit) decodes its
	// first values only
	d := NewDecoder(result(), 0, "PDU")
	d.Skip(32)
	var vs ValueSet
	d.ValueSet(&vs, 0, 4)
	one := make([]source.InstValue, 1)
	d.Values(one, &vs, semantics.Type32, &Blocks{})
	if d.Err() != nil || one[0].Value.Type() != semantics.Type32 || one[0].Value.Int64() != 7 {
		t.Errorf("first value: %+v %v", one, d.Err())
	}
}

// TestValueSetFaults: each broken field of a result gives its offset and
// what is wrong with it.
func TestValueSetFaults(t *testing.T) {
	patch := func(off int, w uint32) []byte {
		b := result()
		copy(b[off:], be(w))
		return b
	}
	cases := []struct {
		name string
		b    []byte
		at   int64
		msg  string
	}{
		{"set truncated", result()[:64], 60, "value set 1 of 4 truncated"},
		{"numval", patch(36, 1000), 36, "numval 1000 of 60.0.1 does not fit in the PDU"},
		{"numval just over", patch(36, 11), 36, "numval 11 of 60.0.1 does not fit in the PDU"},
		{"valfmt", patch(40, 9), 40, "unknown value format 9 of 60.0.1"},
		{"block offset past end", patch(92, 1000), 92, "value block offset 4000 of 60.0.4 outside the PDU"},
		{"block offset in header", patch(92, 7), 92, "value block offset 28 of 60.0.4 outside the PDU"},
		{"block offset of the top bit", patch(92, 0x80000000), 92, "value block offset 8589934592 of 60.0.4 outside the PDU"},
		{"blocks overlap", patch(100, 27), 100, "value block offset 108 of 60.0.4 overlaps the block before, ending at 116"},
		{"block length", patch(104, 3<<24|200), 104, "value block length 200 of 60.0.4 outside the PDU"},
		{"block length under header", patch(104, 3<<24|3), 104, "value block length 3 of 60.0.4 outside the PDU"},
		{"block short for type", patch(104, 3<<24|8), 104, "value block of 4 bytes too short for type u64 of 60.0.4"},
	}
	types := []semantics.Type{semantics.TypeU32, semantics.Type32, semantics.Type32, semantics.TypeU64}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeResult(tc.b, types)
			var we *Error
			if !errors.As(err, &we) || we.Offset != tc.at || we.Msg != tc.msg {
				t.Errorf("error %v, want at byte %d: %s", err, tc.at, tc.msg)
			}
		})
	}
}

// TestInsituTypes: a word in place is a value of the metric's type (the
// U32 and 32 paths, and the others through semantics.InsituValue).
func TestInsituTypes(t *testing.T) {
	pairs := be(5, 0xfffffffe)
	for _, tc := range []struct {
		t    semantics.Type
		want float64
	}{{semantics.TypeU32, 4294967294}, {semantics.Type32, -2}, {semantics.Type64, -2}, {semantics.TypeU64, 4294967294}, {semantics.TypeDouble, -2}} {
		dst := []source.InstValue{{Value: semantics.BytesValue(semantics.TypeString, []byte("old"))}}
		Insitu(dst, pairs, tc.t)
		if dst[0].Inst != 5 || dst[0].Value.Type() != tc.t || dst[0].Value.Float64() != tc.want {
			t.Errorf("%s: %+v, want %v", tc.t, dst[0], tc.want)
		}
	}
}

// TestValuesAllocateNothing: decoding into a reused buffer allocates
// nothing, whatever the number of values.
func TestValuesAllocateNothing(t *testing.T) {
	b := result()
	dst := make([]source.InstValue, 2)
	n := testing.AllocsPerRun(100, func() {
		d := NewDecoder(b, 0, "PDU")
		d.Skip(32)
		bl := Blocks{Lo: 32, Ordered: true}
		for i := 0; i < 4; i++ {
			var vs ValueSet
			d.ValueSet(&vs, i, 4)
			if vs.NumVal > 0 {
				d.Values(dst[:vs.NumVal], &vs, semantics.TypeU64, &bl)
			}
		}
		if d.Err() != nil {
			t.Fatal(d.Err())
		}
	})
	if n != 0 {
		t.Errorf("%v allocations", n)
	}
}

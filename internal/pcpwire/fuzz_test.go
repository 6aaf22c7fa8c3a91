package pcpwire

import (
	"errors"
	"strings"
	"testing"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// FuzzDecoder reads arbitrary bytes as fields chosen by the bytes
// themselves, then as a result's value sets in both byte orders: an error
// is fine; a panic, an error of several lines, an error offset outside
// the input or an allocation beyond its size is not.
func FuzzDecoder(f *testing.F) {
	f.Add(result())
	f.Add(be(3, 0x61626300, 2, 0xffffffff, 8, 1, 2))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		check := func(d *Decoder) {
			err := d.Err()
			if err == nil {
				return
			}
			var we *Error
			if !errors.As(err, &we) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q", err)
			}
			if we.Offset < 0 || we.Offset > int64(len(b)) && !strings.Contains(we.Msg, "past the end") {
				t.Fatalf("error at %d of %d bytes: %v", we.Offset, len(b), err)
			}
		}
		for _, host := range []bool{false, true} {
			d := NewDecoder(b, 0, "PDU")
			if host {
				d = NewHostDecoder(b, 0, "PDU")
			}
			// a seek may go back: at most one operation per byte
			for k := 0; d.Err() == nil && d.Left() > 0 && k <= len(b); k++ {
				switch op := d.U32() % 8; op {
				case 0:
					d.U64()
				case 1:
					n := d.Count(1, "n")
					if len(d.Bytes(n)) != n {
						t.Fatalf("%d bytes counted, fewer read", n)
					}
					d.Pad()
				case 2:
					if n := d.Count(8, "n"); n*8 > len(b) {
						t.Fatalf("count %d of 8-byte items in %d bytes", n, len(b))
					}
				case 3:
					d.Seek(uint64(d.U32()))
				case 4:
					d.End()
				default:
					d.I32()
				}
			}
			check(&d)
		}
		d := NewDecoder(b, 0, "PDU")
		n := d.Count(12, "numpmid")
		bl := Blocks{Ordered: len(b)%2 == 0}
		var dst []source.InstValue
		for i := 0; i < n && d.Err() == nil; i++ {
			var vs ValueSet
			d.ValueSet(&vs, i, n)
			if vs.NumVal > 0 {
				if int(vs.NumVal)*8 > len(b) {
					t.Fatalf("numval %d in %d bytes", vs.NumVal, len(b))
				}
				dst = append(dst[:0], make([]source.InstValue, vs.NumVal)...)
				d.Values(dst, &vs, semantics.Type(i%10), &bl)
				for _, v := range dst {
					v.Value.Float64()
					v.Value.Bytes()
				}
			}
		}
		check(&d)
	})
}

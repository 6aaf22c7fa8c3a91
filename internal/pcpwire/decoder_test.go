package pcpwire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// run applies ops (u32, i32, u64, bytes:N, pad, count:SIZE, seek:OFF,
// end) to d and lists what each returned.
func run(d *Decoder, ops string) string {
	var out []string
	for _, op := range strings.Fields(ops) {
		name, arg, _ := strings.Cut(op, ":")
		var n int
		fmt.Sscan(arg, &n)
		switch name {
		case "u32":
			out = append(out, fmt.Sprint(d.U32()))
		case "i32":
			out = append(out, fmt.Sprint(d.I32()))
		case "u64":
			out = append(out, fmt.Sprint(d.U64()))
		case "i64":
			out = append(out, fmt.Sprint(d.I64()))
		case "bytes":
			out = append(out, fmt.Sprintf("%q", d.Bytes(n)))
		case "pad":
			d.Pad()
			out = append(out, fmt.Sprint("@", d.Pos()))
		case "count":
			out = append(out, fmt.Sprint(d.Count(n, "n")))
		case "seek":
			var off uint64
			fmt.Sscan(arg, &off)
			d.Seek(off)
			out = append(out, fmt.Sprint("@", d.Pos()))
		case "end":
			d.End()
		}
	}
	return strings.Join(out, " ")
}

func be(words ...uint32) []byte {
	var b []byte
	for _, w := range words {
		b = binary.BigEndian.AppendUint32(b, w)
	}
	return b
}

// TestDecoder: the fields' values and the first failure's offset and
// message, for well-formed and broken buffers (layouts of the protocol's
// §3 strings and counts).
func TestDecoder(t *testing.T) {
	cases := []struct {
		name   string
		b      []byte
		base   int64
		host   bool
		ops    string
		want   string
		errOff int64
		errMsg string
	}{
		{"words", be(1, 0xffffffff, 0, 5), 0, false, "u32 i32 u64 end", "1 -1 5", 0, ""},
		{"string padded", append(be(3), 'a', 'b', 'c', '~', 0, 0, 0, 9), 0, false, "count:1 bytes:3 pad u32 end", `3 "abc" @8 9`, 0, ""},
		{"last pad left out", append(be(3), 'a', 'b', 'c'), 0, false, "count:1 bytes:3 pad end", `3 "abc" @7`, 0, ""},
		{"short word", []byte{0, 0, 0, 1, 0, 2}, 100, false, "u32 u32 u32", "1 0 0", 104, "PDU too short (need 4 bytes, 2 left)"},
		{"short u64", be(1), 0, false, "u64", "0", 0, "PDU too short (need 8 bytes, 4 left)"},
		{"sticky", be(1), 0, false, "u64 u32", "0 0", 0, "PDU too short (need 8 bytes, 4 left)"},
		{"count too big", be(1, 3, 0), 0, false, "u32 count:4", "1 0", 4, "n 3 does not fit in the 8 bytes left"},
		{"count negative", be(0x80000000), 0, false, "count:1", "0", 0, "n -2147483648 does not fit in the 4 bytes left"},
		{"count of max int32", be(0x7fffffff, 0), 12, false, "count:8", "0", 12, "n 2147483647 does not fit in the 8 bytes left"},
		{"bytes past end", be(1), 0, false, "bytes:5", `""`, 0, "length 5 exceeds the 4 bytes left in the PDU"},
		{"bytes negative", be(1), 0, false, "bytes:-1", `""`, 0, "length -1 exceeds the 4 bytes left in the PDU"},
		{"trailing bytes", be(1, 2), 0, false, "u32 end", "1", 4, "4 unexpected bytes after the end"},
		{"seek", be(1, 2, 3), 0, false, "seek:8 u32 seek:0 u32", "@8 3 @0 1", 0, ""},
		{"seek past end", be(1), 0, false, "seek:5 u32", "@4 0", 5, "offset 5 past the end of the 4-byte PDU"},
		{"seek huge", be(1), 0, false, "seek:18446744073709551615", "@4", 1 << 62, "offset 18446744073709551615 past the end of the 4-byte PDU"},
		{"host order", []byte{1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0}, 0, true, "u32 u64", hostWords(), 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDecoder(tc.b, tc.base, "PDU")
			if tc.host {
				d = NewHostDecoder(tc.b, tc.base, "PDU")
			}
			if got := run(&d, tc.ops); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
			err := d.Err()
			if tc.errMsg == "" {
				if err != nil {
					t.Errorf("error %v", err)
				}
				return
			}
			var we *Error
			if !errors.As(err, &we) || we.Offset != tc.errOff || we.Msg != tc.errMsg {
				t.Errorf("error %#v, want at %d: %s", err, tc.errOff, tc.errMsg)
			}
		})
	}
}

// hostWords is what "u32 u64" reads from {1,0,0,0,2,0,...} in the host's
// order.
func hostWords() string {
	if binary.NativeEndian.Uint32([]byte{1, 0, 0, 0}) == 1 {
		return "1 2"
	}
	return "16777216 144115188075855872"
}

func TestEncoder(t *testing.T) {
	var e Encoder
	e.Begin(0x700e)
	e.U32(14)
	e.Str("pmcd.hostname")
	e.Finish()
	e.Begin(0x7011)
	e.U32(0)
	e.Raw([]byte("xyz"))
	e.Finish()
	want := append(be(36, 0x700e, 0, 14, 13), "pmcd.hostname~~~"...)
	want = append(want, append(be(19, 0x7011, 0, 0), "xyz"...)...)
	if string(e.B) != string(want) {
		t.Errorf("got % x\nwant % x", e.B, want)
	}
	e.Reset()
	if len(e.B) != 0 || cap(e.B) < len(want) {
		t.Errorf("reset: %d bytes, cap %d", len(e.B), cap(e.B))
	}
}

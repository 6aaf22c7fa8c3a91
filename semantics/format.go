package semantics

import (
	"encoding/base64"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// AppendJSON appends v formatted as the CLI contract's `dump` and `replay`
// print a value: integers exactly (also beyond 2^53), FLOAT and DOUBLE in the
// shortest form that round-trips their own width, the JSON strings "NaN",
// "+Inf" and "-Inf" for those floats, STRING as a JSON string and AGGREGATE
// and EVENT values as {"base64":"..."}. It does not allocate when dst has
// room.
func AppendJSON(dst []byte, v Value) []byte {
	switch v.typ {
	case Type32, Type64:
		return strconv.AppendInt(dst, int64(v.bits), 10)
	case TypeU32, TypeU64:
		return strconv.AppendUint(dst, v.bits, 10)
	case TypeFloat:
		return appendFloat(dst, float64(v.Float32()), 32)
	case TypeDouble:
		return appendFloat(dst, math.Float64frombits(v.bits), 64)
	case TypeString:
		return appendJSONBytes(dst, v.Bytes())
	}
	dst = append(dst, `{"base64":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, v.Bytes())
	return append(dst, `"}`...)
}

// AppendText appends v as plain text, the way AppendJSON formats it but with
// STRING values unquoted and non-finite floats as NaN, +Inf and -Inf (for CSV
// cells and similar; the caller quotes as its format requires).
func AppendText(dst []byte, v Value) []byte {
	switch v.typ {
	case TypeString:
		return append(dst, v.Bytes()...)
	case TypeFloat, TypeDouble:
		f := v.Float64()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return append(dst, nonFinite(f)...)
		}
	}
	return AppendJSON(dst, v)
}

func nonFinite(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case f > 0:
		return "+Inf"
	}
	return "-Inf"
}

// appendFloat formats like encoding/json: shortest round-trip digits for the
// given bit size, exponent form only for very large or small magnitudes.
func appendFloat(dst []byte, f float64, bits int) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		dst = append(dst, '"')
		dst = append(dst, nonFinite(f)...)
		return append(dst, '"')
	}
	abs := math.Abs(f)
	fmt := byte('f')
	if abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			fmt = 'e'
		}
	}
	dst = strconv.AppendFloat(dst, f, fmt, -1, bits)
	if fmt == 'e' {
		// clean up e-09 to e-9
		n := len(dst)
		if n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD.
func AppendJSONString(dst []byte, s string) []byte {
	return appendJSONBytes(dst, []byte(s))
}

func appendJSONBytes(dst []byte, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendTime appends t in UTC as RFC 3339 with exactly nine fractional
// digits, the time form of the CLI contract: 2024-01-01T00:00:10.500000000Z.
func AppendTime(dst []byte, t time.Time) []byte {
	return t.UTC().AppendFormat(dst, "2006-01-02T15:04:05.000000000Z07:00")
}

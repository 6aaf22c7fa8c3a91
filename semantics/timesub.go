package semantics

import (
	"math"
	"math/bits"
)

// TimestampSub is libpcp's time difference (__pmTimestampSub): ds seconds
// and dn nanoseconds (|dn| < 1e9) as the double
//
//	(double)(ds + (long double)dn / 1e9)
//
// evaluated, as on x86, in the 64-bit significand of x87 extended
// precision: the quotient and the sum each rounded to 64 bits, to nearest
// even, then the sum rounded to 53. That differs from double arithmetic in
// the last bit of some times, and interpolated counters show it. Computed
// exactly in integers (no floating point until the last, exact, step).
func TimestampSub(ds, dn int64) float64 {
	if dn == 0 {
		return float64(ds) // exact in long double; rounded once to double
	}
	if dn <= -1e9 || dn >= 1e9 || ds > 1<<33 || ds < -(1<<33) {
		return float64(ds) + float64(dn)/1e9 // outside what times need
	}
	// q = dn / 1e9 rounded to 64 bits: ±m * 2^-k, 2^63 <= m < 2^64
	a := uint64(dn)
	if dn < 0 {
		a = uint64(-dn)
	}
	k := 94 - bits.Len64(a) // a<<k in [2^93, 2^94)
	hi := a << (k - 64)
	if hi >= 1e9 {
		k--
		hi = a << (k - 64)
	}
	m, r := bits.Div64(hi, 0, 1e9)
	if 2*r > 1e9 || (2*r == 1e9 && m&1 == 1) {
		m++
		if m == 0 { // carried out: 2^64
			m, k = 1<<63, k-1
		}
	}
	// s = ds + q exactly: a signed 128-bit multiple of 2^-k (|ds| < 2^33
	// and k <= 93 keep it within 127 bits)
	sh, sl := shl128(0, uint64(abs64(ds)), uint(k))
	neg := ds < 0
	if (dn < 0) == neg || ds == 0 {
		var c uint64
		sl, c = bits.Add64(sl, m, 0)
		sh += c
		neg = dn < 0
	} else if sh > 0 || sl >= m {
		var b uint64
		sl, b = bits.Sub64(sl, m, 0)
		sh -= b
	} else {
		sl = m - sl
		neg = !neg
	}
	// round to 64 bits, then that to 53 (the conversion to double)
	sh, sl, e := round128(sh, sl, 64)
	_, sl, e2 := round128(sh, sl, 53)
	f := math.Ldexp(float64(sl), e+e2-k) // sl < 2^53: exact
	if neg {
		return -f
	}
	return f
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// shl128 shifts the 128-bit hi:lo left by n (< 128) bits.
func shl128(hi, lo uint64, n uint) (uint64, uint64) {
	if n >= 64 {
		return lo << (n - 64), 0
	}
	if n == 0 {
		return hi, lo
	}
	return hi<<n | lo>>(64-n), lo << n
}

// round128 rounds hi:lo to p significant bits, to nearest even: the
// result is (hi:lo) * 2^e with hi:lo < 2^p.
func round128(hi, lo uint64, p int) (uint64, uint64, int) {
	n := bits.Len64(lo)
	if hi != 0 {
		n = 64 + bits.Len64(hi)
	}
	if n <= p {
		return hi, lo, 0
	}
	sh := uint(n - p)
	// kept bits, and the dropped ones compared with half
	var kh, kl uint64
	if sh >= 64 {
		kh, kl = 0, hi>>(sh-64)
	} else {
		kh, kl = hi>>sh, hi<<(64-sh)|lo>>sh
	}
	var dh, dl uint64 // dropped bits
	if sh >= 64 {
		dh, dl = hi&(1<<(sh-64)-1), lo
	} else {
		dh, dl = 0, lo&(1<<sh-1)
	}
	var halfH, halfL uint64
	if sh-1 >= 64 {
		halfH = 1 << (sh - 1 - 64)
	} else {
		halfL = 1 << (sh - 1)
	}
	up := dh > halfH || (dh == halfH && dl > halfL) ||
		(dh == halfH && dl == halfL && kl&1 == 1)
	e := int(sh)
	if up {
		var c uint64
		kl, c = bits.Add64(kl, 1, 0)
		kh += c
		if bits.Len64(kl) > p && kh == 0 || kh != 0 && 64+bits.Len64(kh) > p {
			kh, kl = kh>>1, kh<<63|kl>>1
			e++
		}
	}
	return kh, kl, e
}

package semantics

import (
	"bufio"
	"flag"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/convscale.tsv with libpcp (python3-pcp)")

// TestScaleOf converts the values of testdata/convscale.tsv, written by
// libpcp's pmConvScale (testdata/convscale.py, python3-pcp 6.0.3; -update
// runs it again), and must find libpcp's answer bit for bit: the value, or
// the error (PM_ERR_CONV for other dimensions, PM_ERR_UNIT for a scale
// libpcp does not know). Where libpcp dies dividing by zero (a divisor
// that overflows int64 to 0), ScaleOf answers ErrConv.
func TestScaleOf(t *testing.T) {
	const golden = "testdata/convscale.tsv"
	if *update {
		out, err := exec.Command("/usr/bin/python3", "testdata/convscale.py").Output()
		if err != nil {
			t.Fatalf("convscale.py (needs python3-pcp): %v", err)
		}
		if err := os.WriteFile(golden, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(golden)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	types := map[string]Type{"32": Type32, "u32": TypeU32, "64": Type64, "u64": TypeU64, "float": TypeFloat, "double": TypeDouble}
	sc := bufio.NewScanner(f)
	n, bad := 0, 0
	for line := 1; sc.Scan(); line++ {
		if strings.HasPrefix(sc.Text(), "#") {
			continue
		}
		col := strings.Split(sc.Text(), "\t")
		if len(col) != 5 {
			t.Fatalf("%s:%d: %d columns", golden, line, len(col))
		}
		typ, ok := types[col[0]]
		if !ok {
			t.Fatalf("%s:%d: type %q", golden, line, col[0])
		}
		from, to := convUnits(t, col[1]), convUnits(t, col[2])
		v := convValue(t, typ, col[3])
		var got string
		s, err := ScaleOf(from, to)
		if err == nil {
			var x Value
			x, err = s.Convert(v)
			got = convText(x)
		}
		if err != nil {
			got = "error " + strconv.Itoa(int(err.(PMError)))
		}
		want := col[4]
		if want == "crash" {
			want = "error " + strconv.Itoa(int(ErrConv))
		}
		if (typ == TypeFloat || typ == TypeDouble) && !strings.HasPrefix(want, "error") && !strings.HasPrefix(got, "error") {
			// Python's repr and Go's shortest form round-trip: compare bits
			w, err1 := strconv.ParseFloat(want, 64)
			g, err2 := strconv.ParseFloat(got, 64)
			if err1 == nil && err2 == nil && math.Float64bits(w) == math.Float64bits(g) {
				got = want
			}
		}
		n++
		if got != want {
			if bad++; bad <= 20 {
				t.Errorf("%s:%d: %s %s -> %s of %s: got %s, want %s", golden, line, col[0], col[1], col[2], col[3], got, want)
			}
		}
	}
	if n < 2000 {
		t.Fatalf("%s: %d rows", golden, n)
	}
	if bad > 0 {
		t.Errorf("%d of %d conversions differ from libpcp", bad, n)
	}
}

func convUnits(t *testing.T, s string) Units {
	var d [6]int
	for i, f := range strings.Split(s, ",") {
		x, err := strconv.Atoi(f)
		if err != nil || i >= 6 {
			t.Fatalf("units %q", s)
		}
		d[i] = x
	}
	return Units{DimSpace: int8(d[0]), DimTime: int8(d[1]), DimCount: int8(d[2]),
		ScaleSpace: uint8(d[3]), ScaleTime: uint8(d[4]), ScaleCount: int8(d[5])}
}

func convValue(t *testing.T, typ Type, s string) Value {
	var err error
	var v Value
	switch typ {
	case Type32:
		var x int64
		x, err = strconv.ParseInt(s, 10, 32)
		v = Int32Value(int32(x))
	case TypeU32:
		var x uint64
		x, err = strconv.ParseUint(s, 10, 32)
		v = Uint32Value(uint32(x))
	case Type64:
		var x int64
		x, err = strconv.ParseInt(s, 10, 64)
		v = Int64Value(x)
	case TypeU64:
		var x uint64
		x, err = strconv.ParseUint(s, 10, 64)
		v = Uint64Value(x)
	case TypeFloat:
		var x float64
		x, err = strconv.ParseFloat(s, 64)
		v = FloatValue(float32(x))
	default:
		var x float64
		x, err = strconv.ParseFloat(s, 64)
		v = DoubleValue(x)
	}
	if err != nil {
		t.Fatalf("value %q: %v", s, err)
	}
	return v
}

// convText formats v: integers in decimal, FLOAT and DOUBLE as the
// shortest text of their double.
func convText(v Value) string {
	switch v.Type() {
	case Type32, Type64:
		return strconv.FormatInt(v.Int64(), 10)
	case TypeU32, TypeU64:
		return strconv.FormatUint(v.Uint64(), 10)
	}
	return strconv.FormatFloat(v.Float64(), 'g', -1, 64)
}

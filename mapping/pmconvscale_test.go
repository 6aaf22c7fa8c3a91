package mapping

import (
	"bufio"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/pcp-exporter/pcp-exporter/semantics"
)

// TestPMConvScale converts the values of testdata/pmconvscale.tsv (real
// values of the local pmcd and edge values, for every unit the table's
// generator lists) and finds libpcp's bits: pmExtractValue to DOUBLE, then
// pmConvScale(PM_TYPE_DOUBLE), which multiplies by mult/div (743132 ms is
// 743.1320000000001 s). Every output takes its values from Float64 (scrape,
// backfill) or OTelValue (push, OTLP backfill); the text form is Go's
// shortest, which parses back to the same bits, and integers stay exact
// where the unit does not scale (libpcp's integer pmConvScale with
// mult = div = 1).
func TestPMConvScale(t *testing.T) {
	f, err := os.Open("testdata/pmconvscale.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, _ := New(nil, Options{})
	sc := bufio.NewScanner(f)
	n, bad := 0, 0
	for line := 1; sc.Scan(); line++ {
		if strings.HasPrefix(sc.Text(), "#") {
			continue
		}
		col := strings.Split(sc.Text(), "\t")
		if len(col) != 5 {
			t.Fatalf("pmconvscale.tsv:%d: %d columns", line, len(col))
		}
		typ, u, v, want := pmconvType(t, col[0]), pmconvUnits(t, col[1]), pmconvValue(t, col[0], col[2]), pmconvFloat(t, col[3])
		fam, why := m.Map(&sourceMetric("conv."+col[4], desc(typ, semantics.SemInstant, u)).m)
		if why != "" {
			t.Fatalf("line %d skipped: %s", line, why)
		}
		n++
		got, otel := fam.Float64(v), fam.OTelValue(v)
		text := string(fam.AppendValue(nil, v))
		parsed, err := strconv.ParseFloat(text, 64)
		switch {
		case math.Float64bits(got) != math.Float64bits(want):
			t.Errorf("line %d: %s %s %s (%s): Float64 %v, libpcp %v", line, col[0], u, col[2], col[4], got, want)
		case math.Float64bits(otel) != math.Float64bits(want):
			t.Errorf("line %d: %s %s %s (%s): OTelValue %v, libpcp %v", line, col[0], u, col[2], col[4], otel, want)
		case fam.integer && text != col[2]:
			t.Errorf("line %d: %s %s %s: text %s, want the integer", line, col[0], u, col[2], text)
		case !fam.integer && (err != nil || math.Float64bits(parsed) != math.Float64bits(want)):
			t.Errorf("line %d: %s %s %s: text %s, libpcp %v", line, col[0], u, col[2], text, want)
		default:
			continue
		}
		if bad++; bad > 20 {
			t.Fatal("more than 20 values differ")
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 1000 {
		t.Fatalf("%d values in pmconvscale.tsv", n)
	}
	t.Logf("%d values", n)
}

func pmconvType(t *testing.T, s string) semantics.Type {
	switch s {
	case "32":
		return semantics.Type32
	case "u32":
		return semantics.TypeU32
	case "64":
		return semantics.Type64
	case "u64":
		return semantics.TypeU64
	case "float":
		return semantics.TypeFloat
	case "double":
		return semantics.TypeDouble
	}
	t.Fatalf("type %q", s)
	return 0
}

// pmconvUnits reads dimSpace,dimTime,dimCount,scaleSpace,scaleTime,scaleCount.
func pmconvUnits(t *testing.T, s string) semantics.Units {
	var x [6]int
	for i, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(f)
		if err != nil || i >= 6 {
			t.Fatalf("units %q", s)
		}
		x[i] = v
	}
	return semantics.Units{DimSpace: int8(x[0]), DimTime: int8(x[1]), DimCount: int8(x[2]),
		ScaleSpace: uint8(x[3]), ScaleTime: uint8(x[4]), ScaleCount: int8(x[5])}
}

func pmconvValue(t *testing.T, typ, s string) semantics.Value {
	var err error
	var v semantics.Value
	switch typ {
	case "32":
		var x int64
		x, err = strconv.ParseInt(s, 10, 32)
		v = semantics.Int32Value(int32(x))
	case "u32":
		var x uint64
		x, err = strconv.ParseUint(s, 10, 32)
		v = semantics.Uint32Value(uint32(x))
	case "64":
		var x int64
		x, err = strconv.ParseInt(s, 10, 64)
		v = semantics.Int64Value(x)
	case "u64":
		var x uint64
		x, err = strconv.ParseUint(s, 10, 64)
		v = semantics.Uint64Value(x)
	case "float":
		var x float64
		x, err = strconv.ParseFloat(s, 64)
		if float64(float32(x)) != x {
			t.Fatalf("FLOAT %s is not a float32", s)
		}
		v = semantics.FloatValue(float32(x))
	case "double":
		var x float64
		x, err = strconv.ParseFloat(s, 64)
		v = semantics.DoubleValue(x)
	}
	if err != nil {
		t.Fatalf("%s value %q: %v", typ, s, err)
	}
	return v
}

func pmconvFloat(t *testing.T, s string) float64 {
	x, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("libpcp's value %q: %v", s, err)
	}
	return x
}

package semantics

import (
	"math"
	"testing"
	"time"
)

// Cases follow the CLI contract of design.md (dump): exact integers beyond
// 2^53, shortest round-trip floats of their own width, NaN/+Inf/-Inf strings,
// JSON strings, base64 aggregates. The values are the extremes of the
// corpus's types archive.
func TestAppendJSON(t *testing.T) {
	for _, c := range []struct {
		v    Value
		want string
	}{
		{Int32Value(-2147483648), "-2147483648"},
		{Uint32Value(4294967295), "4294967295"},
		{Int64Value(-9223372036854775808), "-9223372036854775808"},
		{Uint64Value(18446744073709551615), "18446744073709551615"},
		{Uint64Value(9007199254740993), "9007199254740993"},
		{FloatValue(0.1), "0.1"},
		{FloatValue(16777216), "16777216"},
		{FloatValue(math.MaxFloat32), "3.4028235e+38"},
		{FloatValue(float32(math.Copysign(0, -1))), "-0"},
		{DoubleValue(0.1), "0.1"},
		{DoubleValue(1000000000000000.1), "1000000000000000.1"},
		{DoubleValue(9.094947017729282e-13), "9.094947017729282e-13"},
		{DoubleValue(5e-324), "5e-324"},
		{DoubleValue(math.NaN()), `"NaN"`},
		{DoubleValue(math.Inf(1)), `"+Inf"`},
		{FloatValue(float32(math.Inf(-1))), `"-Inf"`},
		{StringValue(""), `""`},
		{StringValue("a \"q\" \\ \n\t café ✓"), `"a \"q\" \\ \n\t café ✓"`},
		{StringValue("\x01\xff"), `"\u0001\ufffd"`},
		{BytesValue(TypeAggregate, []byte{0, 1, 2, 0xff}), `{"base64":"AAEC/w=="}`},
	} {
		if got := string(AppendJSON(nil, c.v)); got != c.want {
			t.Errorf("%v: %s, want %s", c.v, got, c.want)
		}
	}
}

func TestAppendJSONNoAlloc(t *testing.T) {
	buf := make([]byte, 0, 256)
	vals := []Value{Uint64Value(1 << 60), DoubleValue(1.5), FloatValue(0.25), StringValue("x")}
	n := testing.AllocsPerRun(100, func() {
		for _, v := range vals {
			buf = AppendJSON(buf[:0], v)
		}
	})
	if n != 0 {
		t.Errorf("%v allocations per run", n)
	}
}

func TestAppendTimeAndText(t *testing.T) {
	tm := time.Unix(1704067210, 500000000)
	if got := string(AppendTime(nil, tm)); got != "2024-01-01T00:00:10.500000000Z" {
		t.Errorf("AppendTime %s", got)
	}
	if got := string(AppendText(nil, DoubleValue(math.Inf(-1)))); got != "-Inf" {
		t.Errorf("AppendText %s", got)
	}
	if got := string(AppendText(nil, StringValue(`a"b`))); got != `a"b` {
		t.Errorf("AppendText %s", got)
	}
}

func TestPMErrorText(t *testing.T) {
	// texts as printed in the corpus's records.csv and by pmerr -l (6.0.3)
	if got := ErrPMID.Error(); got != "Unknown or illegal metric identifier" {
		t.Errorf("%q", got)
	}
	if got := PMError(-2).Error(); got != "No such file or directory" {
		t.Errorf("%q", got)
	}
}

package semantics

import (
	"bufio"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestTimestampSubMatchesLongDouble compares TimestampSub with the
// expression of libpcp's __pmTimestampSub compiled by gcc on x86-64 (long
// double is x87 extended): testdata/timesub.txt is the output of
// testdata/timesub.c (gcc -O2 -o timesub timesub.c && ./timesub; -O0 gives
// the same bytes), "ds dn bits-of-the-double" per line.
func TestTimestampSubMatchesLongDouble(t *testing.T) {
	f, err := os.Open("testdata/timesub.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n, differ := 0, 0
	for sc.Scan() {
		p := strings.Fields(sc.Text())
		ds, _ := strconv.ParseInt(p[0], 10, 64)
		dn, _ := strconv.ParseInt(p[1], 10, 64)
		want, _ := strconv.ParseUint(p[2], 16, 64)
		got := TimestampSub(ds, dn)
		if math.Float64bits(got) != want {
			t.Errorf("TimestampSub(%d, %d) = %v (%016x), want %v (%016x)", ds, dn, got, math.Float64bits(got), math.Float64frombits(want), want)
		}
		if float64(ds)+float64(dn)/1e9 != got {
			differ++
		}
		n++
	}
	if n < 4000 {
		t.Fatalf("only %d cases", n)
	}
	// the cases are only worth it if double arithmetic gets some wrong
	if differ == 0 {
		t.Errorf("double arithmetic agrees on all %d cases: the table tests nothing", n)
	}
	t.Logf("%d cases, %d where double arithmetic differs", n, differ)
}

// BenchmarkTimestampSub: one per record and per fetch of a replay.
func BenchmarkTimestampSub(b *testing.B) {
	var s float64
	for i := 0; i < b.N; i++ {
		s += TimestampSub(int64(i&1023), int64(i*7919)%1e9)
	}
	_ = s
}

package derive

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestParseUnitsMatchesLibpcp parses every units string of
// testdata/units.tsv, written by libpcp (testdata/units.py, python3-pcp
// 6.0.3's pmParseUnitsStr; -update runs it again): every unit word in
// three cases, with exponents in and out of range, on either side of '/',
// numbers as strtod reads them (hexadecimal, inf, nan, overflow, inexact
// and exact subnormals), separators libpcp does not know ('*', a second
// '/'), duplicates and dimensions out of bounds. The units must be
// libpcp's, field for field, and its refusals ours, with its message;
// where libpcp aborts (a time-N scale above hours on both sides), the
// string must be refused. The multiplier, which rescale() and mkconst()
// ignore, is compared within 1e-12 (Go's math.Pow is not glibc's pow).
func TestParseUnitsMatchesLibpcp(t *testing.T) {
	const golden = "testdata/units.tsv"
	if *update {
		writeGolden(t, golden, "units.py")
	}
	f, err := os.Open(golden)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	rows, kinds := 0, map[string]int{}
	for line := 1; sc.Scan(); line++ {
		if strings.HasPrefix(sc.Text(), "#") {
			continue
		}
		col := strings.Split(sc.Text(), "\t")
		var s string
		if len(col) < 2 || json.Unmarshal([]byte(col[0]), &s) != nil {
			t.Fatalf("%s:%d: bad row %q", golden, line, sc.Text())
		}
		rows++
		kinds[col[1]]++
		u, mult, err := parseUnitsStr(s)
		switch col[1] {
		case "ok":
			if len(col) != 9 {
				t.Fatalf("%s:%d: %d columns", golden, line, len(col))
			}
			if err != nil {
				t.Errorf("%s:%d: %q: %v, libpcp parses it", golden, line, s, err)
				continue
			}
			got := []int{int(u.DimSpace), int(u.DimTime), int(u.DimCount), int(u.ScaleSpace), int(u.ScaleTime), int(u.ScaleCount)}
			for i, g := range got {
				if w, _ := strconv.Atoi(col[2+i]); g != w {
					t.Errorf("%s:%d: %q: units %v, libpcp %v", golden, line, s, got, col[2:8])
					break
				}
			}
			want, err := strconv.ParseFloat(col[8], 64)
			if err != nil {
				t.Fatalf("%s:%d: multiplier %q", golden, line, col[8])
			}
			if !(math.IsNaN(want) && math.IsNaN(mult)) && mult != want && math.Abs(mult-want) > 1e-12*math.Abs(want) {
				t.Errorf("%s:%d: %q: multiplier %v, libpcp %v", golden, line, s, mult, want)
			}
		case "error":
			if err == nil || err.Error() != col[2] {
				t.Errorf("%s:%d: %q: error %v, libpcp %q", golden, line, s, err, col[2])
			}
		case "abort":
			if err == nil {
				t.Errorf("%s:%d: %q: parsed (%+v), libpcp aborts", golden, line, s, u)
			}
		default:
			t.Fatalf("%s:%d: %q", golden, line, col[1])
		}
	}
	if rows < 3000 || kinds["ok"] < 1000 || kinds["error"] < 1000 || kinds["abort"] == 0 {
		t.Fatalf("%s: %d rows %v", golden, rows, kinds)
	}
}

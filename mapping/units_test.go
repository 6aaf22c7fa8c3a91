package mapping

import (
	"bufio"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/pcp-exporter/pcp-exporter/semantics"
)

// unitCases are the units of the corpus's types archive, with the base unit
// computed by hand: space scales are powers of 1024, time scales go to
// seconds, count scales are 10^n.
var unitCases = []struct {
	pcp    string // PCP's string form, as pminfo prints it
	units  semantics.Units
	scale  float64
	suffix string
	ucum   string
}{
	{"Kbyte", semantics.Units{DimSpace: 1, ScaleSpace: semantics.SpaceKByte}, 1024, "bytes", "By"},
	{"Kbyte / count", semantics.Units{DimSpace: 1, DimCount: -1, ScaleSpace: semantics.SpaceKByte}, 1024, "bytes", "By/{count}"},
	{"Kbyte / sec", semantics.Units{DimSpace: 1, DimTime: -1, ScaleSpace: semantics.SpaceKByte, ScaleTime: semantics.TimeSec}, 1024, "bytes_per_second", "By/s"},
	{"Mbyte", semantics.Units{DimSpace: 1, ScaleSpace: semantics.SpaceMByte}, 1048576, "bytes", "By"},
	{"Mbyte / hour", semantics.Units{DimSpace: 1, DimTime: -1, ScaleSpace: semantics.SpaceMByte, ScaleTime: semantics.TimeHour}, 1048576.0 / 3600, "bytes_per_second", "By/s"},
	{"Tbyte", semantics.Units{DimSpace: 1, ScaleSpace: semantics.SpaceTByte}, 1099511627776, "bytes", "By"},
	{"byte / sec", semantics.Units{DimSpace: 1, DimTime: -1, ScaleTime: semantics.TimeSec}, 1, "bytes_per_second", "By/s"},
	{"count", semantics.Units{DimCount: 1}, 1, "", "{count}"},
	{"count / sec", semantics.Units{DimCount: 1, DimTime: -1, ScaleTime: semantics.TimeSec}, 1, "per_second", "{count}/s"},
	{"count x 10^-2", semantics.Units{DimCount: 1, ScaleCount: -2}, 0.01, "", "{count}"},
	{"count x 10^3", semantics.Units{DimCount: 1, ScaleCount: 3}, 1000, "", "{count}"},
	{"hour", semantics.Units{DimTime: 1, ScaleTime: semantics.TimeHour}, 3600, "seconds", "s"},
	{"microsec", semantics.Units{DimTime: 1, ScaleTime: semantics.TimeUSec}, 1e-6, "seconds", "s"},
	{"millisec", semantics.Units{DimTime: 1, ScaleTime: semantics.TimeMSec}, 1e-3, "seconds", "s"},
	{"nanosec", semantics.Units{DimTime: 1, ScaleTime: semantics.TimeNSec}, 1e-9, "seconds", "s"},
	{"none", semantics.Units{}, 1, "", "1"},
	{"sec", semantics.Units{DimTime: 1, ScaleTime: semantics.TimeSec}, 1, "seconds", "s"},
	{"sec^2", semantics.Units{DimTime: 2, ScaleTime: semantics.TimeSec}, 1, "seconds_squared", "s2"},
}

func TestBaseUnitTypesArchive(t *testing.T) {
	// Every unit of the types archive is in the table.
	f, err := os.Open("../testdata/pcp-corpus/archives/types/expected/types.pminfo-dmTtl.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if _, u, ok := strings.Cut(sc.Text(), "Units: "); ok {
			seen[u] = true
		}
	}
	for _, c := range unitCases {
		delete(seen, c.pcp)
	}
	for u := range seen {
		t.Errorf("unit %q of the types archive has no test case", u)
	}
	for _, c := range unitCases {
		got := BaseUnit(c.units)
		if math.Abs(got.Scale-c.scale) > 1e-15*c.scale || got.Suffix != c.suffix || got.UCUM != c.ucum {
			t.Errorf("%s: got %+v, want scale %v suffix %q UCUM %q", c.pcp, got, c.scale, c.suffix, c.ucum)
		}
		// The packed word round-trips (the table's Units are what PCP stores).
		if semantics.UnitsFromWord(c.units.Word()) != c.units {
			t.Errorf("%s: word round trip", c.pcp)
		}
	}
}

// TestConvertedValues checks converted values of the types archive, from the
// values in types.records.csv (sample 1, t=1.5 s) converted by hand.
func TestConvertedValues(t *testing.T) {
	cases := []struct {
		metric string
		desc   semantics.Desc
		v      semantics.Value
		want   string
	}{
		// 1024.5 Kbyte/s = 1024.5*1024 B/s
		{"types.kbyte_rate", semantics.Desc{Type: semantics.TypeFloat, Sem: semantics.SemInstant, Units: unitCases[2].units}, semantics.FloatValue(1024.5), "1.049088e+06"},
		// 1e9 Mbyte/hour = 1e9*1048576/3600 B/s = 291271111111.1111
		{"types.mbyte_per_hour", semantics.Desc{Type: semantics.TypeDouble, Sem: semantics.SemInstant, Units: unitCases[4].units}, semantics.DoubleValue(1e9), "2.912711111111111e+11"},
		// -25 count x 10^-2 = -0.25
		{"types.count_e_minus2", semantics.Desc{Type: semantics.Type32, Sem: semantics.SemInstant, Units: unitCases[9].units}, semantics.Int32Value(-25), "-0.25"},
		// -3 hours = -10800 s
		{"types.hours", semantics.Desc{Type: semantics.Type32, Sem: semantics.SemInstant, Units: unitCases[11].units}, semantics.Int32Value(-3), "-10800"},
		// 9007199254740003 count x 10^3 = 9.007199254740003e18
		{"types.i64_counter", semantics.Desc{Type: semantics.Type64, Sem: semantics.SemCounter, Units: unitCases[10].units}, semantics.Int64Value(9007199254740003), "9.007199254740003e+18"},
		// 3 Tbyte = 3298534883328 bytes
		{"types.tbytes", semantics.Desc{Type: semantics.TypeU64, Sem: semantics.SemInstant, Units: unitCases[5].units}, semantics.Uint64Value(3), "3.298534883328e+12"},
		// u64 max millisec: 18446744073709551.615 s, the nearest float64 in shortest form
		{"types.u64", semantics.Desc{Type: semantics.TypeU64, Sem: semantics.SemInstant, Units: unitCases[13].units}, semantics.Uint64Value(math.MaxUint64), "1.844674407370955e+16"},
		// count, no scaling: integers stay exact
		{"types.u64_discrete", semantics.Desc{Type: semantics.TypeU64, Sem: semantics.SemDiscrete, Units: unitCases[7].units}, semantics.Uint64Value(18446744073709551615), "18446744073709551615"},
		{"types.i64", semantics.Desc{Type: semantics.Type64, Sem: semantics.SemInstant, Units: unitCases[6].units}, semantics.Int64Value(math.MinInt64), "-9223372036854775808"},
		{"types.double", semantics.Desc{Type: semantics.TypeDouble, Sem: semantics.SemInstant, Units: unitCases[14].units}, semantics.DoubleValue(math.NaN()), "NaN"},
		{"types.float", semantics.Desc{Type: semantics.TypeFloat, Sem: semantics.SemInstant, Units: unitCases[12].units}, semantics.FloatValue(float32(math.Inf(1))), "+Inf"},
		{"types.double_neg", semantics.Desc{Type: semantics.TypeDouble, Sem: semantics.SemInstant, Units: unitCases[14].units}, semantics.DoubleValue(math.Inf(-1)), "-Inf"},
		// 9.094947017729282e-13 sec^2 stays as it is
		{"types.sec_squared", semantics.Desc{Type: semantics.TypeDouble, Sem: semantics.SemInstant, Units: unitCases[17].units}, semantics.DoubleValue(9.094947017729282e-13), "9.094947017729282e-13"},
	}
	m, _ := New(nil, Options{})
	for _, c := range cases {
		f, why := m.Map(&sourceMetric(c.metric, c.desc).m)
		if why != "" {
			t.Fatalf("%s skipped: %s", c.metric, why)
		}
		if got := string(f.AppendValue(nil, c.v)); got != c.want {
			t.Errorf("%s: value %s, want %s", c.metric, got, c.want)
		}
	}
}

func TestSnakeCase(t *testing.T) {
	for in, want := range map[string]string{
		"mem_util_commitLimit":        "mem_util_commit_limit",
		"mem_util_hugepagesFreeBytes": "mem_util_hugepages_free_bytes",
		"mem_util_directMap4k":        "mem_util_direct_map4k",
		"disk_dev_IOPS":               "disk_dev_iops",
		"network_TCPSocket":           "network_tcp_socket",
		"already_snake":               "already_snake",
		"a_Bc":                        "a_bc",
		"mem_util_directMap2M":        "mem_util_direct_map2m",
	} {
		if got := snakeCase(in); got != want {
			t.Errorf("snakeCase(%q) = %q, want %q", in, got, want)
		}
	}
}

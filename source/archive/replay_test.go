package archive

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/internal/longtest"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/archive/internal/archivetest"
	"github.com/pcp-exporter/pcp-exporter/source/archive/internal/readhooks"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

// interpArgs parses "-a ARCH -t I -S O ROOTS..." of a pmfetch_interp row.
func interpArgs(t testing.TB, args string) (arch string, interval, offset float64, roots []string) {
	f := strings.Fields(args)
	for i := 0; i < len(f); i++ {
		switch f[i] {
		case "-a":
			i++
			arch = f[i]
		case "-t":
			i++
			interval, _ = strconv.ParseFloat(f[i], 64)
		case "-S":
			i++
			offset, _ = strconv.ParseFloat(f[i], 64)
		default:
			roots = append(roots, f[i])
		}
	}
	if arch == "" || interval == 0 {
		t.Fatalf("cannot parse %q", args)
	}
	return
}

func secondsDur(s float64) time.Duration { return time.Duration(s*1e9 + 0.5) }

// replayRows replays like pmfetch_interp.py -t I -S O ROOTS: from the archive
// start plus O every I until the next time would be past the archive end, and
// returns rows time,metric,inst,value of every value (values only).
func replayRows(t testing.TB, arch string, rule semantics.InterpRule, interval, offset float64, roots []string) []string {
	a, err := pcplog.Open(filepath.Join(corpus, arch))
	if err != nil {
		t.Fatal(err)
	}
	rp, err := NewReplay([]*pcplog.Archive{a}, ReplayOptions{Interp: rule})
	if err != nil {
		t.Fatal(err)
	}
	defer rp.Close()
	return replayRowsFrom(t, rp, interval, offset, roots)
}

func replayRowsFrom(t testing.TB, rp *Replay, interval, offset float64, roots []string) []string {
	var ms []source.Metric
	for _, m := range rp.Metrics() {
		for _, root := range roots {
			if m.Name == root || strings.HasPrefix(m.Name, root+".") {
				ms = append(ms, m)
				break
			}
		}
	}
	pmids := make([]semantics.PMID, len(ms))
	for i, m := range ms {
		pmids[i] = m.Desc.PMID
	}
	end, err := rp.End()
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	var res source.Result
	for i := 0; ; i++ {
		tm := rp.Start().Add(secondsDur(offset + float64(i)*interval))
		if tm.After(end) {
			break
		}
		if err := rp.Fetch(tm, pmids, &res); err != nil {
			t.Fatalf("fetch %v: %v", tm, err)
		}
		ts := fmt.Sprintf("%d.%09d", tm.Unix(), tm.Nanosecond())
		for j, s := range res.Sets {
			if s.Err != nil {
				rows = append(rows, fmt.Sprintf("%s,%s,err,%v", ts, ms[j].Name, s.Err))
				continue
			}
			for _, v := range s.Values {
				rows = append(rows, fmt.Sprintf("%s,%s,%d,%s", ts, ms[j].Name, v.Inst, valueKey(v.Value)))
			}
		}
	}
	sort.Strings(rows)
	return rows
}

// valueKey is archivetest.ValueText with floats normalised so that bit-identical values
// compare equal whatever Python's repr chose.
func valueKey(v semantics.Value) string {
	switch v.Type() {
	case semantics.TypeFloat:
		return fmt.Sprintf("f%016x", mathFloat64bits(float64(v.Float32())))
	case semantics.TypeDouble:
		return fmt.Sprintf("f%016x", mathFloat64bits(v.Float64()))
	}
	return archivetest.ValueText(v)
}

func expectedRows(t testing.TB, path string) []string {
	var rows []string
	for _, c := range archivetest.ReadCSV(t, path) {
		if len(c) < 8 {
			continue
		}
		if c[7] != "ok" {
			if c[7] != "no values" {
				rows = append(rows, fmt.Sprintf("%s,%s,err,%s", c[1], c[2], c[7]))
			}
			continue
		}
		val := c[6]
		if c[5] == "FLOAT" || c[5] == "DOUBLE" {
			f, err := strconv.ParseFloat(val, 64)
			if err != nil {
				t.Fatalf("%s: bad float %q", path, val)
			}
			val = fmt.Sprintf("f%016x", mathFloat64bits(f))
		}
		rows = append(rows, fmt.Sprintf("%s,%s,%s,%s", c[1], c[2], c[3], val))
	}
	sort.Strings(rows)
	return rows
}

func diffRows(want, got []string) string {
	w := map[string]bool{}
	for _, r := range want {
		w[r] = true
	}
	g := map[string]bool{}
	for _, r := range got {
		g[r] = true
	}
	var b strings.Builder
	n := 0
	for _, r := range want {
		if !g[r] && n < 12 {
			fmt.Fprintf(&b, "\n  missing: %s", r)
			n++
		}
	}
	for _, r := range got {
		if !w[r] && n < 24 {
			fmt.Fprintf(&b, "\n  extra:   %s", r)
			n++
		}
	}
	return b.String()
}

// TestReplayMatchesCorpus replays every interpolation answer of the corpus:
// *.interp.csv (PCP 6.0.3, the prior rule) and *.interp.nearest.csv (PCP
// 7.2.1, the nearest rule), same archive, start offset, interval and
// metrics, and wants exactly the same (time, metric, instance, value) rows.
func TestReplayMatchesCorpus(t *testing.T) {
	searchSkips, passed, ran, rows := 0, 0, 0, 0
	for _, tc := range []struct {
		tool string
		rule semantics.InterpRule
	}{{"pmfetch_interp", semantics.InterpPrior}, {"pmfetch_interp_nearest", semantics.InterpNearest}} {
		for _, row := range interpManifest(t, tc.tool) {
			args, out := row[0], row[1]
			arch, _, _, _ := interpArgs(t, args)
			rows++
			t.Run(tc.rule.String()+"/"+filepath.Base(arch)+"/"+filepath.Base(out), func(t *testing.T) {
				ran++
				arch, iv, off, roots := interpArgs(t, args)
				a, err := pcplog.Open(filepath.Join(corpus, arch))
				if err != nil {
					t.Fatal(err)
				}
				rp, err := NewReplay([]*pcplog.Archive{a}, ReplayOptions{Interp: tc.rule})
				if err != nil {
					t.Fatal(err)
				}
				defer rp.Close()
				rp.test = &replayTest{}
				got := replayRowsFrom(t, rp, iv, off, roots)
				searchSkips += rp.test.searchSuperseded
				passed += rp.passed
				want := expectedRows(t, filepath.Join(corpus, out))
				if d := diffRows(want, got); d != "" {
					t.Errorf("%s %s: %d rows wanted, %d got:%s", tc.tool, args, len(want), len(got), d)
				}
			})
		}
	}
	// the answers compared with libpcp's include fetches whose forward
	// search skipped superseded value sets, and sparse reading's passing
	// over records (what TestReplayMatchesLibpcp's recording exercises when
	// pmlogger keeps up)
	if ran == rows && (searchSkips == 0 || passed == 0) {
		t.Errorf("value sets skipped by searchForward: %d, records passed over: %d; want both > 0", searchSkips, passed)
	}
	t.Logf("%d value sets skipped by searchForward, %d records passed over", searchSkips, passed)
}

func mathFloat64bits(f float64) uint64 {
	if math.IsNaN(f) {
		return 0x7ff8000000000001
	}
	return math.Float64bits(f)
}

// interpManifest returns (args, output) of every interpolating row of tool
// in manifest.tsv without extra environment (derived-metric rows have one).
func interpManifest(t testing.TB, tool string) [][2]string {
	t.Helper()
	f, err := os.Open(filepath.Join(corpus, "manifest.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][2]string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		c := strings.Split(sc.Text(), "\t")
		if len(c) >= 6 && c[1] == tool && strings.Contains(" "+c[2], " -t ") && !strings.Contains(" "+c[2], " -d ") && c[4] == "-" {
			out = append(out, [2]string{c[2], c[3]})
		}
	}
	if len(out) == 0 {
		t.Fatalf("no %s rows in manifest.tsv", tool)
	}
	return out
}

// TestReplaySmallWindow replays every corpus answer again with a window of
// one record, so that finding the next observations goes through the probe
// reader: same rows.
func TestReplaySmallWindow(t *testing.T) {
	for _, row := range interpManifest(t, "pmfetch_interp_nearest") {
		args, out := row[0], row[1]
		arch, iv, off, roots := interpArgs(t, args)
		a, err := pcplog.Open(filepath.Join(corpus, arch))
		if err != nil {
			t.Fatal(err)
		}
		rp, err := NewReplay([]*pcplog.Archive{a}, ReplayOptions{Window: 1})
		if err != nil {
			t.Fatal(err)
		}
		got := replayRowsFrom(t, rp, iv, off, roots)
		rp.Close()
		want := expectedRows(t, filepath.Join(corpus, out))
		if d := diffRows(want, got); d != "" {
			t.Errorf("%s (window 1):%s", args, d)
		}
	}
}

// TestReplayMultiArchive replays marks' two parts given as separate
// archives, one timeline as a libpcp multi-archive context, against the
// answers for the pmlogextract merge of the same parts (whose <mark> 1 ms
// after part_a's end is what the replay synthesizes between archives).
func TestReplayMultiArchive(t *testing.T) {
	n := 0
	defer func() {
		if n < 8 {
			t.Errorf("only %d marks answers replayed", n)
		}
	}()
	for _, tc := range []struct {
		tool string
		rule semantics.InterpRule
	}{{"pmfetch_interp", semantics.InterpPrior}, {"pmfetch_interp_nearest", semantics.InterpNearest}} {
		for _, row := range interpManifest(t, tc.tool) {
			arch, iv, off, roots := interpArgs(t, row[0])
			if arch != "archives/marks/marks" {
				continue
			}
			n++
			var as []*pcplog.Archive
			for _, p := range []string{"part_b", "part_a"} { // any order: sorted by start
				a, err := pcplog.Open(filepath.Join(corpus, "archives/marks/parts", p))
				if err != nil {
					t.Fatal(err)
				}
				as = append(as, a)
			}
			rp, err := NewReplay(as, ReplayOptions{Interp: tc.rule})
			if err != nil {
				t.Fatal(err)
			}
			got := replayRowsFrom(t, rp, iv, off, roots)
			rp.Close()
			want := expectedRows(t, filepath.Join(corpus, row[1]))
			if d := diffRows(want, got); d != "" {
				t.Errorf("%s as two archives (%s):%s", row[0], tc.rule, d)
			}
		}
	}
}

// TestReplayWindowIsOnlyMemory: the window size decides only how far ahead
// records are kept and when the probe reader takes over, never the values.
// Copies of the live archive with one record restamped (to half a second
// after the record five before it: time going back in the file; or to the
// time of the record before it: two records at one time) replay every
// metric alike with windows of one and four records (probes everywhere,
// reading only the metrics whose bounds the records ahead can change) and
// one larger than the archive (no probe).
//
// Without PCPX_LONG_TESTS every third record is restamped.
func TestReplayWindowIsOnlyMemory(t *testing.T) {
	// records 8 to 31: the 7 s group of the archive (proc.nprocs and
	// others) against the 1 s group in every phase
	for k := 8; k < 32; k += longtest.Stride(24, 8) {
		for _, mode := range []string{"back", "equal"} {
			a := restampedLive(t, k, mode)
			var roots []string
			for _, m := range a.Metrics() {
				roots = append(roots, m.Name)
			}
			rows := func(window int) []string {
				rp, err := NewReplay([]*pcplog.Archive{a}, ReplayOptions{Window: window})
				if err != nil {
					t.Fatal(err)
				}
				defer rp.Close()
				return replayRowsFrom(t, rp, 0.7, 0.25, roots)
			}
			want := rows(1 << 20)
			if len(want) < 1000 {
				t.Fatalf("record %d %s: only %d rows", k, mode, len(want))
			}
			for _, w := range []int{1, 4} {
				got := rows(w)
				if d := diffRows(want, got); d != "" {
					t.Errorf("record %d %s: window %d vs no probe: %d rows wanted, %d got:%s", k, mode, w, len(want), len(got), d)
				}
			}
			// a window of 32 records stopped by its value count
			func() {
				defer func(n int) { windowValues = n }(windowValues)
				windowValues = 40
				if d := diffRows(want, rows(32)); d != "" {
					t.Errorf("record %d %s: window of 40 values vs no probe:%s", k, mode, d)
				}
			}()
		}
	}
}

// restampedLive opens a copy of the live archive whose record k is
// restamped: to half a second after the record five before it (mode
// "back": time going back in the file) or to the time of the record before
// it ("equal": two records at one time).
func restampedLive(t *testing.T, k int, mode string) *pcplog.Archive {
	t.Helper()
	return archivetest.EditedLive(t, pcplog.Open, func(b []byte, recs []int) {
		at := recs[k]
		switch mode {
		case "back": // v2 timestamp: sec, usec
			from := recs[k-5]
			sec, usec := be32(b[from+4:]), be32(b[from+8:])+500000
			if usec >= 1000000 {
				sec, usec = sec+1, usec-1000000
			}
			put32(b, at+4, sec)
			put32(b, at+8, usec)
		case "equal":
			copy(b[at+4:at+12], b[recs[k-1]+4:])
		}
	})
}

// TestReplaySupersededJumbled: skipping superseded value sets (roll and
// searchForward) answers as applying every record does, on archives whose
// record times repeat and go back all through the file, at fetch times
// drawn at random (some on record times), with windows of 1 to 32 records,
// over every metric and over random subsets of those logged in most
// records. The seeds are fixed: 12, 4 without PCPX_LONG_TESTS.
func TestReplaySupersededJumbled(t *testing.T) {
	searchSkips, cases := 0, 0
	seeds := int64(12)
	if !longtest.Enabled() {
		seeds = 4
	}
	for seed := int64(1); seed <= seeds; seed++ {
		rng := rand.New(rand.NewSource(seed))
		a := archivetest.JumbledLive(t, pcplog.Open, rng, []float64{0.1, 0.3, 0.5}[seed%3])
		end, err := a.End()
		if err != nil {
			t.Fatal(err)
		}
		// the metrics with values in about as many records as the most
		// frequent: a metric with an instance never seen makes every
		// fetch roll, and searchForward then never moves the position
		var recTimes []time.Time
		withValues := map[semantics.PMID]int{}
		rd := a.Records()
		for rd.Next() {
			recTimes = append(recTimes, rd.Record().Time)
			for _, set := range rd.Record().Sets {
				if len(set.Values) > 0 {
					withValues[set.PMID]++
				}
			}
		}
		rd.Close()
		most := 0
		for _, n := range withValues {
			most = max(most, n)
		}
		for iter := 0; iter < 6; iter++ {
			var pmids []semantics.PMID
			for _, m := range a.Metrics() {
				regular := withValues[m.Desc.PMID] >= most*9/10
				singular := m.Desc.InDom == semantics.InDomNull
				switch {
				case iter%3 == 0, // every metric
					iter%3 == 1 && regular && singular,
					iter%3 == 2 && regular && rng.Intn(2) == 0:
				default:
					continue
				}
				pmids = append(pmids, m.Desc.PMID)
			}
			var times []time.Time
			tm := a.Label().Start.Add(time.Duration(rng.Int63n(int64(time.Second))))
			for tm.Before(end) {
				times = append(times, tm)
				if rng.Intn(4) == 0 { // on a record's time, or just after it
					rt := recTimes[rng.Intn(len(recTimes))]
					if rt.After(tm) {
						tm = rt.Add(time.Duration(rng.Intn(2)))
						continue
					}
				}
				step := []time.Duration{50 * time.Millisecond, 300 * time.Millisecond, 2 * time.Second}[rng.Intn(3)]
				tm = tm.Add(1 + time.Duration(rng.Int63n(int64(step))))
			}
			rule := []semantics.InterpRule{semantics.InterpNearest, semantics.InterpPrior}[rng.Intn(2)]
			window := []int{1, 2, 4, 32}[rng.Intn(4)]
			rows := func(applyAll bool) []string {
				rp := newTestReplay(t, []*pcplog.Archive{a}, ReplayOptions{Interp: rule, Window: window}, applyAll)
				defer rp.Close()
				rows := fetchRows(t, rp, times, pmids)
				searchSkips += rp.test.searchSuperseded
				return rows
			}
			want, got := rows(true), rows(false)
			if d := diffRows(want, got); d != "" {
				t.Errorf("seed %d case %d (%s, window %d, %d metrics, %d fetches): skipping superseded sets changed the answer:%s", seed, iter, rule, window, len(pmids), len(times), d)
			}
			cases++
		}
	}
	if searchSkips == 0 {
		t.Fatal("searchForward never skipped a superseded set")
	}
	t.Logf("%d cases, %d value sets skipped by searchForward", cases, searchSkips)
}

// TestReplaySmallReadBuffer replays every corpus answer with a volume read
// buffer of 256 bytes, which the reader compacts and refills all the time:
// the records the reader hands over (strings included) must not change
// under the replay.
func TestReplaySmallReadBuffer(t *testing.T) {
	defer readhooks.SetMinWindow(readhooks.SetMinWindow(256))
	for _, row := range interpManifest(t, "pmfetch_interp_nearest") {
		args, out := row[0], row[1]
		arch, iv, off, roots := interpArgs(t, args)
		got := replayRows(t, arch, semantics.InterpNearest, iv, off, roots)
		want := expectedRows(t, filepath.Join(corpus, out))
		if d := diffRows(want, got); d != "" {
			t.Errorf("%s (256-byte read buffer):%s", args, d)
		}
	}
}

// TestReplaySupersededSets: moving the position forward (rolling, or
// searching forward from the position) skips the value sets of a record
// that the next record repeats (same metric, same instances); the
// replay must answer exactly as when it applies every record, for every
// corpus archive at intervals shorter and longer than the logging
// intervals, at several offsets, with both rules, and around the records
// TestReplayWindowIsOnlyMemory restamps (time going back, equal times).
// Without PCPX_LONG_TESTS: one interval and offset per archive, in turn.
func TestReplaySupersededSets(t *testing.T) {
	t.Parallel()
	skipped, searchSkipped := 0, 0
	check := func(a *pcplog.Archive, arch string, ivs, offs []float64) {
		var roots []string
		for _, m := range a.Metrics() {
			roots = append(roots, m.Name)
		}
		for _, rule := range []semantics.InterpRule{semantics.InterpNearest, semantics.InterpPrior} {
			for _, iv := range ivs {
				for _, off := range offs {
					rows := func(applyAll bool) []string {
						rp, err := NewReplay([]*pcplog.Archive{a}, ReplayOptions{Interp: rule})
						if err != nil {
							t.Fatal(err)
						}
						defer rp.Close()
						rp.test = &replayTest{applyAll: applyAll}
						got := replayRowsFrom(t, rp, iv, off, roots)
						skipped += rp.superseded
						searchSkipped += rp.test.searchSuperseded
						return got
					}
					want, got := rows(true), rows(false)
					if d := diffRows(want, got); d != "" {
						t.Errorf("%s %s -t %g -S %g: skipping superseded sets changed the answer:%s", arch, rule, iv, off, d)
					}
				}
			}
		}
	}
	seen := map[string]bool{}
	var archs []string
	for _, tool := range []string{"pmfetch_interp", "pmfetch_interp_nearest"} {
		for _, row := range interpManifest(t, tool) {
			arch, _, _, _ := interpArgs(t, row[0])
			if !seen[arch] {
				seen[arch] = true
				archs = append(archs, arch)
			}
		}
	}
	if len(archs) < 5 {
		t.Fatalf("only %d archives", len(archs))
	}
	// without PCPX_LONG_TESTS: one interval and offset per archive, in turn,
	// and every ninth record restamped
	ivs, offs, kStep := []float64{0.3, 1, 7.3}, []float64{0.05, 1.9}, 3
	long := longtest.Enabled()
	if !long {
		kStep = 9
	}
	for i, arch := range archs {
		a, err := pcplog.Open(filepath.Join(corpus, arch))
		if err != nil {
			t.Fatal(err)
		}
		if long {
			check(a, arch, ivs, offs)
		} else {
			check(a, arch, ivs[i%3:i%3+1], offs[i%2:i%2+1])
		}
	}
	for k := 8; k < 32; k += kStep {
		for _, mode := range []string{"back", "equal"} {
			check(restampedLive(t, k, mode), fmt.Sprintf("live record %d %s", k, mode), []float64{0.7, 2.1}, []float64{0.25})
		}
	}
	if skipped == 0 || searchSkipped == 0 {
		t.Fatalf("value sets skipped as superseded: %d, by searchForward: %d; want both > 0", skipped, searchSkipped)
	}
	t.Logf("%d archives, %d value sets skipped as superseded, %d of them by searchForward", len(archs), skipped, searchSkipped)
}

// corpus is the repository's corpus of archives and libpcp's answers.
const corpus = "../../testdata/pcp-corpus"

func be32(b []byte) uint32 { return binary.BigEndian.Uint32(b) }

func put32(b []byte, off int, v uint32) { binary.BigEndian.PutUint32(b[off:], v) }

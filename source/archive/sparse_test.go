package archive

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"slices"
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

// TestReplaySparse: a replay whose fetches are several records apart reads
// sparsely (see window.front and pcplog.Reader.SkipRun), passing over runs of
// records, and answers exactly as applying every record does. Each
// timeline is replayed at regular steps of 2.5 to 23 times its usual
// record spacing from two offsets, and with steps changing between dense
// and sparse ones (the reading switches between the prefetching goroutine
// and sparse reading), over every metric and over the metrics that have
// values in most records (whose runs are the ones passed over).
//
// Without PCPX_LONG_TESTS each timeline replays a third of the schedules,
// a different third for consecutive timelines.
func TestReplaySparse(t *testing.T) {
	sparseEvery := 3
	if longtest.Enabled() {
		sparseEvery = 1
	}
	names, sets, clean := archivetest.Timelines(t, pcplog.Open)
	g0 := runtime.NumGoroutine()
	rng := rand.New(rand.NewSource(7))
	refused0, used0, missed0 := readhooks.Counts()
	// what tails reads ahead is used whenever predicted right, however
	// busy the processors are
	defer readhooks.SetTailsWaitAll(readhooks.SetTailsWaitAll(true))
	var passed, switches, cases, sparseTimelines int
	for ti, as := range sets {
		var recTimes []time.Time
		withValues := map[semantics.PMID]int{}
		for _, a := range clean[ti] {
			rd := a.Records()
			for rd.Next() {
				rec := rd.Record()
				recTimes = append(recTimes, rec.Time)
				for _, set := range rec.Sets {
					if len(set.Values) > 0 {
						withValues[set.PMID]++
					}
				}
			}
			rd.Close() // an error: the records before it

		}
		if len(recTimes) < 8 {
			continue
		}
		slices.SortFunc(recTimes, func(a, b time.Time) int { return a.Compare(b) })
		var gaps []time.Duration
		for i := 1; i < len(recTimes); i++ {
			if g := recTimes[i].Sub(recTimes[i-1]); g > 0 {
				gaps = append(gaps, g)
			}
		}
		slices.Sort(gaps)
		spacing := gaps[len(gaps)/2]
		most := 0
		for _, n := range withValues {
			most = max(most, n)
		}
		first, last := recTimes[0], recTimes[len(recTimes)-1]
		var schedules [][]time.Time
		for _, k := range []float64{2.5, 4, 9, 23} {
			for _, off := range []time.Duration{0, spacing / 3} {
				var ts []time.Time
				step := time.Duration(k * float64(spacing))
				for tm := first.Add(off); !tm.After(last); tm = tm.Add(step) {
					ts = append(ts, tm)
				}
				schedules = append(schedules, ts)
			}
		}
		var mixed []time.Time
		for tm, i := first, 0; !tm.After(last); i++ {
			mixed = append(mixed, tm)
			if i/6%2 == 0 {
				tm = tm.Add(spacing / 2)
			} else {
				tm = tm.Add(7 * spacing)
			}
		}
		schedules = append(schedules, mixed)
		// on record times (repeated in the jumbled copies) and 1 ns after
		var onRecords []time.Time
		for i := 0; i < len(recTimes); i += 1 + rng.Intn(9) {
			tm := recTimes[i].Add(time.Duration(rng.Intn(2)))
			if len(onRecords) == 0 || tm.After(onRecords[len(onRecords)-1]) {
				onRecords = append(onRecords, tm)
			}
		}
		schedules = append(schedules, onRecords)
		var all, regular []semantics.PMID
		seen := map[semantics.PMID]bool{}
		for _, a := range clean[ti] {
			for _, m := range a.Metrics() {
				if seen[m.Desc.PMID] {
					continue
				}
				seen[m.Desc.PMID] = true
				all = append(all, m.Desc.PMID)
				if withValues[m.Desc.PMID] >= most*9/10 {
					regular = append(regular, m.Desc.PMID)
				}
			}
		}
		timelinePassed := 0
		for si, ts := range schedules {
			if (si+ti)%sparseEvery != 0 {
				continue
			}
			for _, pmids := range [][]semantics.PMID{all, regular} {
				rule := []semantics.InterpRule{semantics.InterpNearest, semantics.InterpPrior}[rng.Intn(2)]
				want, _, _ := sparseRows(t, as, rule, ts, pmids, true)
				got, n, sw := sparseRows(t, as, rule, ts, pmids, false)
				if d := diffRows(want, got); d != "" {
					t.Errorf("%s, schedule %d (%d fetches), %d metrics, %s: sparse reading changed the answer:%s", names[ti], si, len(ts), len(pmids), rule, d)
				}
				timelinePassed += n
				switches += sw
				cases++
			}
		}
		passed += timelinePassed
		if timelinePassed > 0 {
			sparseTimelines++
		}
	}
	refused1, used1, missed1 := readhooks.Counts()
	refused := refused1 - refused0
	t.Logf("%d cases over %d timelines: %d records passed over (in %d timelines), %d runs refused, %d switches between dense and sparse reading",
		cases, len(sets), passed, sparseTimelines, refused, switches)
	if sparseTimelines < len(sets)/2 {
		t.Errorf("records were passed over in only %d timelines of %d", sparseTimelines, len(sets))
	}
	if refused == 0 {
		t.Error("no run was refused: the test does not cover reading on after a refusal")
	}
	if switches == 0 {
		t.Error("the reading never switched between dense and sparse")
	}
	// the runs' ends read ahead (see tails) were used, and predicted
	// wrongly too, with the answers unchanged
	used, missed := used1-used0, missed1-missed0
	t.Logf("runs' ends read ahead: %d used, %d predicted wrongly", used, missed)
	if used == 0 || missed == 0 {
		t.Errorf("runs' ends read ahead: %d used, %d predicted wrongly: the test covers both", used, missed)
	}
	// every replay closed: no prefetching goroutine left
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > g0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > g0 {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Errorf("%d goroutines left running after the replays closed (%d before):\n%s", g-g0, g0, buf)
	}
}

// sparseRows replays as at the times ts and returns the rows of every
// answer (see fetchRows), the records passed over and the switches.
func sparseRows(t *testing.T, as []*pcplog.Archive, rule semantics.InterpRule, ts []time.Time, pmids []semantics.PMID, applyAll bool) ([]string, int, int) {
	t.Helper()
	rp := newTestReplay(t, as, ReplayOptions{Interp: rule}, applyAll)
	defer rp.Close()
	return fetchRows(t, rp, ts, pmids), rp.passed, rp.test.switches
}

// newTestReplay is NewReplay, applying every record (none passed over, no
// superseded set skipped) when applyAll is set: the reference.
func newTestReplay(t *testing.T, as []*pcplog.Archive, opts ReplayOptions, applyAll bool) *Replay {
	t.Helper()
	rp, err := NewReplay(as, opts)
	if err != nil {
		t.Fatal(err)
	}
	rp.test = &replayTest{applyAll: applyAll}
	return rp
}

// fetchRows fetches pmids at the times ts and returns a row per value, per
// set error and per fetch error, each naming its time.
func fetchRows(t *testing.T, rp *Replay, ts []time.Time, pmids []semantics.PMID) []string {
	t.Helper()
	var rows []string
	var res source.Result
	for _, tm := range ts {
		if err := rp.Fetch(tm, pmids, &res); err != nil {
			rows = append(rows, fmt.Sprintf("%d %v", tm.UnixNano(), err))
			continue
		}
		for j, s := range res.Sets {
			if s.Err != nil {
				rows = append(rows, fmt.Sprintf("%d %s %v", tm.UnixNano(), pmids[j], s.Err))
			}
			for _, v := range s.Values {
				rows = append(rows, fmt.Sprintf("%d %s %d %s", tm.UnixNano(), pmids[j], v.Inst, valueKey(v.Value)))
			}
		}
	}
	return rows
}

// liveRegular returns the record times of the corpus's live archive and the
// metrics with values in at least 80% of its records.
func liveRegular(t *testing.T) ([]time.Time, []semantics.PMID) {
	t.Helper()
	live, err := pcplog.Open(filepath.Join(corpus, "archives/live/live"))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	var times []time.Time
	cnt := map[semantics.PMID]int{}
	rd := live.Records()
	defer rd.Close()
	for rd.Next() {
		times = append(times, rd.Record().Time)
		for _, s := range rd.Record().Sets {
			if len(s.Values) > 0 {
				cnt[s.PMID]++
			}
		}
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	var pmids []semantics.PMID
	for _, m := range live.Metrics() {
		if cnt[m.Desc.PMID] >= len(times)*8/10 {
			pmids = append(pmids, m.Desc.PMID)
		}
	}
	return times, pmids
}

// TestReplaySparseUndecoded pins what sparse reading checks of the records
// it passes over: their framing (see TestReplaySparse), not their value
// sets. A value set corrupt inside a record passed over fails no fetch,
// where reading every record fails the fetch that reads it; the same
// record read as the last of a run (or after it) fails the fetch, with the
// file and the offset.
func TestReplaySparseUndecoded(t *testing.T) {
	const k = 60
	var recOff, setOff int
	a := archivetest.EditedLive(t, pcplog.Open, func(b []byte, recs []int) {
		recOff, setOff = recs[k], recs[k]+16
		put32(b, setOff+4, 1<<20) // numval of the record's first set
	})
	times, pmids := liveRegular(t)
	at := func(ks ...int) []time.Time {
		var ts []time.Time
		for _, i := range ks {
			ts = append(ts, times[i].Add(time.Millisecond))
		}
		return ts
	}
	// fetches 8 records apart: the record is inside the run of the fetch
	// after k-4, whose last record is k+4
	over := at(k-28, k-20, k-12, k-4, k+4, k+12)
	rows, passed, _ := sparseRows(t, []*pcplog.Archive{a}, semantics.InterpPrior, over, pmids, false)
	for _, r := range rows {
		if strings.Contains(r, "numval") {
			t.Errorf("a record passed over failed a fetch: %s", r)
		}
	}
	if passed == 0 {
		t.Fatal("no record passed over")
	}
	wantErr := fmt.Sprintf("offset %d: numval %d", setOff+4, 1<<20)
	rows, _, _ = sparseRows(t, []*pcplog.Archive{a}, semantics.InterpPrior, over, pmids, true)
	if !slices.ContainsFunc(rows, func(r string) bool { return strings.Contains(r, wantErr) && strings.Contains(r, "live.0") }) {
		t.Errorf("reading every record: no error %q among %d rows", wantErr, len(rows))
	}
	// the record last of a run: the fetch fails
	last := at(k-24, k-16, k-8, k, k+8)
	rows, passed, _ = sparseRows(t, []*pcplog.Archive{a}, semantics.InterpPrior, last, pmids, false)
	if passed == 0 || !slices.ContainsFunc(rows, func(r string) bool { return strings.Contains(r, wantErr) && strings.Contains(r, "live.0") }) {
		t.Errorf("record %d (offset %d) last of a run: %d passed over, no error %q", k, recOff, passed, wantErr)
	}
}

// TestReplaySparseGrowing: an archive that grows between fetches (live.0
// cut inside records, the rest appended in pieces as the fetches go on)
// answers as reading every record does, whichever way it is read; the
// fetches' pace changes (steps of 1 to 13 records), so the reading goes
// from sparse to dense and back. (The prefetching goroutine used to answer
// with an end of the data found before the archive grew.)
func TestReplaySparseGrowing(t *testing.T) {
	t.Parallel()
	src := filepath.Join(corpus, "archives/live/live")
	times, regular := liveRegular(t)
	vol, err := os.ReadFile(src + ".0")
	if err != nil {
		t.Fatal(err)
	}
	passed, switches := 0, 0
	for seed := int64(0); seed < 40; seed++ {
		rng := rand.New(rand.NewSource(seed))
		var cuts []int // the volume's size after each growth
		for range 2 + rng.Intn(5) {
			cuts = append(cuts, 200+rng.Intn(len(vol)-200))
		}
		slices.Sort(cuts)
		cuts = append(cuts, len(vol))
		stepMax := 2 + rng.Intn(12)
		var ts []time.Time
		for i := 0; i < len(times); i += 1 + rng.Intn(stepMax) {
			ts = append(ts, times[i].Add(time.Duration(rng.Intn(3))*time.Millisecond))
		}
		every := len(ts)/len(cuts) + 1
		run := func(applyAll bool) []string {
			base := archivetest.CopyArchive(t, src, t.TempDir())
			if err := os.WriteFile(base+".0", vol[:cuts[0]], 0o644); err != nil {
				t.Fatal(err)
			}
			a, err := pcplog.Open(base)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			rp := newTestReplay(t, []*pcplog.Archive{a}, ReplayOptions{}, applyAll)
			defer rp.Close()
			var rows []string
			ci := 0
			for fi := range ts {
				if ci+1 < len(cuts) && fi > 0 && fi%every == 0 {
					f, err := os.OpenFile(base+".0", os.O_APPEND|os.O_WRONLY, 0)
					if err != nil {
						t.Fatal(err)
					}
					if _, err := f.Write(vol[cuts[ci]:cuts[ci+1]]); err != nil {
						t.Fatal(err)
					}
					f.Close()
					ci++
				}
				rows = append(rows, fetchRows(t, rp, ts[fi:fi+1], regular)...)
			}
			if !applyAll {
				passed += rp.passed
				switches += rp.test.switches
			}
			return rows
		}
		want, got := run(true), run(false)
		if d := diffRows(want, got); d != "" {
			t.Errorf("seed %d (volume grown to %v bytes, steps of 1 to %d records): the answers differ from reading every record:%s", seed, cuts, stepMax, d)
		}
	}
	t.Logf("40 growing archives: %d records passed over, %d switches between dense and sparse reading", passed, switches)
	if passed == 0 || switches == 0 {
		t.Error("no record passed over, or no switch: the test misses its purpose")
	}
}

package archive

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/archive/internal/archivetest"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

var reMark = regexp.MustCompile(`(?m)^(\d\d:\d\d:\d\d\.\d+)\s+<mark>`)

// dumplogRun reads, from the corpus's pmdumplog answers for archive name
// (under archives/marks/expected), its label start (`pmdumplog -l`) and
// the times of its <mark> records (`pmdumplog -M`, times of day on the
// label's day: the marks archives span minutes).
func dumplogRun(t *testing.T, name string) (start time.Time, marks []time.Time) {
	t.Helper()
	dir := filepath.Join(corpus, "archives/marks/expected")
	l, err := os.ReadFile(filepath.Join(dir, name+".pmdumplog-l.txt"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`commencing (.*)`).FindSubmatch(l)
	if m == nil {
		t.Fatalf("%s: no label start in pmdumplog -l", name)
	}
	if start, err = time.Parse("Mon Jan _2 15:04:05 2006", string(m[1])); err != nil {
		t.Fatal(err)
	}
	dump, err := os.ReadFile(filepath.Join(dir, name+".pmdumplog-M.txt"))
	if err != nil {
		t.Fatal(err)
	}
	day := start.Truncate(24 * time.Hour)
	for _, mm := range reMark.FindAllSubmatch(dump, -1) {
		tod, err := time.Parse("15:04:05", string(mm[1]))
		if err != nil {
			t.Fatal(err)
		}
		marks = append(marks, day.Add(tod.Sub(tod.Truncate(24*time.Hour))))
	}
	return start, marks
}

// latest returns the latest of start and the marks at or before t.
func latest(start time.Time, marks []time.Time, t time.Time) time.Time {
	for _, m := range marks {
		if !m.After(t) && m.After(start) {
			start = m
		}
	}
	return start
}

// generationsAt fetches rp at start+secs, in order, and returns the
// generation after each fetch.
func generationsAt(t *testing.T, rp *Replay, start time.Time, secs []float64) []time.Time {
	t.Helper()
	pmids := []semantics.PMID{rp.Metrics()[0].Desc.PMID}
	var res source.Result
	var out []time.Time
	for _, s := range secs {
		at := start.Add(time.Duration(s * float64(time.Second)))
		if err := rp.Fetch(at, pmids, &res); err != nil {
			t.Fatalf("fetch at +%vs: %v", s, err)
		}
		out = append(out, source.GenerationOf(rp, pmids[0]))
	}
	return out
}

// the times fetched: around the mark (00:00:50.001), in the gap, in
// part_b (from 00:03:10), to the end, then back to the start (a loop)
var generationSecs = []float64{0, 25, 50, 50.0005, 50.001, 60, 189.999, 190, 230, 240, 0, 30, 195}

// TestReplayGeneration: the generation of a replay is the archive's label
// start, then the time of its last <mark> at or before the fetch, as
// pmdumplog shows them, for the corpus's archives with a mark (pmlogextract
// merges, v2 and v3, and LOGIMPORT's pmiPutMark).
func TestReplayGeneration(t *testing.T) {
	for _, name := range []string{"marks", "marks_v3", "marks_from_v3", "marks_pmi", "marks_pmi_v3"} {
		t.Run(name, func(t *testing.T) {
			start, marks := dumplogRun(t, name)
			if len(marks) != 1 {
				t.Fatalf("pmdumplog -M shows %d marks, want 1", len(marks))
			}
			a, err := pcplog.Open(filepath.Join(corpus, "archives/marks", name))
			if err != nil {
				t.Fatal(err)
			}
			rp, err := NewReplay([]*pcplog.Archive{a}, ReplayOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer rp.Close()
			if g := rp.Generation(0); !g.IsZero() {
				t.Errorf("before any fetch: %v, want zero", g)
			}
			for i, g := range generationsAt(t, rp, start, generationSecs) {
				at := start.Add(time.Duration(generationSecs[i] * float64(time.Second)))
				if want := latest(start, marks, at); !g.Equal(want) {
					t.Errorf("at +%vs: generation %v, want %v", generationSecs[i], g.UTC(), want.UTC())
				}
			}
		})
	}
}

// TestReplayGenerationMultiArchive: replaying marks' two parts as one
// timeline, the generation is part_a's start, then the mark libpcp puts
// between the archives (the one pmlogextract wrote into the merge: 1 ms
// after part_a's end), then part_b's start.
func TestReplayGenerationMultiArchive(t *testing.T) {
	for _, v := range []string{"", "_v3"} {
		t.Run("parts"+v, func(t *testing.T) {
			startA, _ := dumplogRun(t, "part_a"+v)
			startB, _ := dumplogRun(t, "part_b"+v)
			_, merged := dumplogRun(t, "marks"+v)
			var as []*pcplog.Archive
			for _, p := range []string{"part_b", "part_a"} {
				a, err := pcplog.Open(filepath.Join(corpus, "archives/marks/parts", p+v))
				if err != nil {
					t.Fatal(err)
				}
				as = append(as, a)
			}
			rp, err := NewReplay(as, ReplayOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer rp.Close()
			for i, g := range generationsAt(t, rp, startA, generationSecs) {
				at := startA.Add(time.Duration(generationSecs[i] * float64(time.Second)))
				want := latest(startA, merged, at)
				if !at.Before(startB) {
					want = startB
				}
				if !g.Equal(want) {
					t.Errorf("at +%vs: generation %v, want %v", generationSecs[i], g.UTC(), want.UTC())
				}
			}
		})
	}
}

// TestFollowGeneration: a followed directory's generation is the start of
// the first archive followed, and stays when pmlogger starts the next one
// (the series go on across the rotation).
func TestFollowGeneration(t *testing.T) {
	dir := t.TempDir()
	archivetest.CopyArchive(t, filepath.Join(corpus, "archives", "marks/parts", "part_a"), dir)
	startA, _ := dumplogRun(t, "part_a")
	startB, _ := dumplogRun(t, "part_b")
	const delay = 5 * time.Second
	f := NewFollow(dir, FollowOptions{Delay: delay})
	defer f.Close()
	served(t, f, startA.Add(20*time.Second+delay))
	if g := source.GenerationOf(f, 0); !g.Equal(startA) {
		t.Errorf("in part_a: generation %v, want part_a's start %v", g.UTC(), startA.UTC())
	}
	epoch := f.Epoch()
	archivetest.CopyArchive(t, filepath.Join(corpus, "archives", "marks/parts", "part_b"), dir)
	served(t, f, startB.Add(10*time.Second+delay))
	if f.Epoch() == epoch {
		t.Fatal("still on part_a")
	}
	if g := source.GenerationOf(f, 0); !g.Equal(startA) {
		t.Errorf("in part_b: generation %v, want part_a's start %v (the run goes on)", g.UTC(), startA.UTC())
	}
}

package archive

import (
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/internal/longtest"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/archive/internal/archivetest"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

// denseIndex copies the uncompressed archive at base into a temporary
// directory with a temporal index entry at every every-th record (pmlogger
// writes few: the corpus archives have two to seven), so that positioning
// has stretches to search back through. It returns the copy's base name.
func denseIndex(t *testing.T, base string, every int) string {
	t.Helper()
	a, err := pcplog.Open(base)
	if err != nil {
		t.Fatal(err)
	}
	v := a.Label().Version
	dense := archivetest.CopyArchive(t, base, t.TempDir())
	ib, err := os.ReadFile(base + ".index")
	if err != nil {
		t.Fatal(err)
	}
	out := append([]byte(nil), ib[:pcplog.LabelSize(v)]...)
	orig := a.Index()
	tsz := 8
	if v == 3 {
		tsz = 12
	}
	rd := a.Records()
	defer rd.Close()
	n := 0
	vols := map[int][]byte{}
	for i := 0; rd.Next(); i++ {
		rec := rd.Record()
		if i%every != 0 {
			continue
		}
		vol, ok := vols[rec.Vol]
		if !ok {
			vol, err = os.ReadFile(fmt.Sprintf("%s.%d", base, rec.Vol))
			if err != nil {
				t.Fatal(err)
			}
			vols[rec.Vol] = vol
		}
		// the meta offset of the latest real entry at or before the record
		var metaOff int64
		for _, e := range orig {
			if !e.Time.After(rec.Time) {
				metaOff = e.MetaOff
			}
		}
		e := make([]byte, pcplog.IndexEntrySize(v))
		copy(e, vol[rec.Off+4:rec.Off+4+int64(tsz)])
		if v == 3 {
			binary.BigEndian.PutUint32(e[12:], uint32(rec.Vol))
			binary.BigEndian.PutUint64(e[16:], uint64(metaOff))
			binary.BigEndian.PutUint64(e[24:], uint64(rec.Off))
		} else {
			binary.BigEndian.PutUint32(e[8:], uint32(rec.Vol))
			binary.BigEndian.PutUint32(e[12:], uint32(metaOff))
			binary.BigEndian.PutUint32(e[16:], uint32(rec.Off))
		}
		out = append(out, e...)
		n++
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 2 {
		t.Fatalf("%s: only %d index entries written", base, n)
	}
	if err := os.WriteFile(dense+".index", out, 0o644); err != nil {
		t.Fatal(err)
	}
	return dense
}

// recordTimes returns the time of every record of the archives, sorted.
func recordTimes(t *testing.T, bases []string) []time.Time {
	t.Helper()
	var out []time.Time
	for _, b := range bases {
		a, err := pcplog.Open(b)
		if err != nil {
			t.Fatal(err)
		}
		rd := a.Records()
		for rd.Next() {
			out = append(out, rd.Record().Time)
		}
		if err := rd.Err(); err != nil {
			t.Fatal(err)
		}
		rd.Close()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

// positionRun replays every metric of the archives from start, fetches
// times 0.7 s apart (up to the end), positioning from the index or
// (fullScan) from the archive's start.
func positionRun(t *testing.T, bases []string, rule semantics.InterpRule, start time.Time, fullScan bool) (rows []string, positioned, restarts int) {
	t.Helper()
	var as []*pcplog.Archive
	for _, b := range bases {
		a, err := pcplog.Open(b)
		if err != nil {
			t.Fatal(err)
		}
		as = append(as, a)
	}
	rp, err := NewReplay(as, ReplayOptions{Interp: rule})
	if err != nil {
		t.Fatal(err)
	}
	defer rp.Close()
	rp.test = &replayTest{fullScan: fullScan}
	var pmids []semantics.PMID
	var names []string
	for _, m := range rp.Metrics() {
		pmids = append(pmids, m.Desc.PMID)
		names = append(names, m.Name)
	}
	end, err := rp.End()
	if err != nil {
		t.Fatal(err)
	}
	var res source.Result
	for i := 0; i < 4; i++ {
		tm := start.Add(time.Duration(i) * 700 * time.Millisecond)
		if tm.After(end) {
			break
		}
		if err := rp.Fetch(tm, pmids, &res); err != nil {
			if errors.Is(err, semantics.ErrEOL) {
				rows = append(rows, fmt.Sprintf("%d,eol", tm.UnixNano()))
				break
			}
			t.Fatalf("fetch %v: %v", tm, err)
		}
		ts := fmt.Sprintf("%d.%09d", tm.Unix(), tm.Nanosecond())
		for j, s := range res.Sets {
			if s.Err != nil {
				rows = append(rows, fmt.Sprintf("%s,%s,err,%v", ts, names[j], s.Err))
				continue
			}
			for _, v := range s.Values {
				rows = append(rows, fmt.Sprintf("%s,%s,%d,%s", ts, names[j], v.Inst, valueKey(v.Value)))
			}
		}
	}
	sort.Strings(rows)
	return rows, rp.test.positioned, rp.test.restarts
}

// TestReplayPositionMatchesFullScan: the first fetch positions from the
// temporal index (the last entry before it, searching earlier stretches
// only for the instances no later record bounds), and must answer exactly
// as positioning by applying every record from the archive's start. Every
// uncompressed corpus archive, with pmlogger's index and with an entry at
// every record and every third record; the live archive with a record
// restamped (time going back in the file, which makes the positioning
// start over from the archive's start, and two records at one time); the
// marks parts as one timeline; first fetches at every record's time and 1
// ms either side, with each rule in turn (at 12 record times per archive,
// 4 without PCPX_LONG_TESTS).
func TestReplayPositionMatchesFullScan(t *testing.T) {
	type variant struct {
		name  string
		bases []string
	}
	var vs []variant
	seen := map[string]bool{}
	for _, tool := range []string{"pmfetch_interp", "pmfetch_interp_nearest"} {
		for _, row := range interpManifest(t, tool) {
			arch, _, _, _ := interpArgs(t, row[0])
			if seen[arch] || strings.Contains(arch, "compressed") {
				continue
			}
			seen[arch] = true
			base := filepath.Join(corpus, arch)
			vs = append(vs,
				variant{arch, []string{base}},
				variant{arch + " (entry every record)", []string{denseIndex(t, base, 1)}},
				variant{arch + " (entry every 3rd record)", []string{denseIndex(t, base, 3)}})
		}
	}
	for k := 8; k < 32; k += 5 {
		for _, mode := range []string{"back", "equal"} {
			base := restampedLive(t, k, mode).Path()
			vs = append(vs, variant{fmt.Sprintf("live record %d %s (entry every record)", k, mode), []string{denseIndex(t, base, 1)}})
		}
	}
	// volumes compressed: their index entries are not used
	for _, arch := range []string{"archives/live/live", "archives/multivol/multivol"} {
		base := denseIndex(t, filepath.Join(corpus, arch), 1)
		vols, err := filepath.Glob(base + ".[0-9]")
		if err != nil || len(vols) == 0 {
			t.Fatalf("%s: volumes %v, %v", base, vols, err)
		}
		for i, v := range vols {
			if i == len(vols)-1 && len(vols) > 1 {
				break // the last one plain, as pmlogger_daily leaves it
			}
			archivetest.CompressFile(t, v, v+".gz", func(w io.Writer) (io.WriteCloser, error) { return gzip.NewWriter(w), nil })
			if err := os.Remove(v); err != nil {
				t.Fatal(err)
			}
		}
		vs = append(vs, variant{arch + " (entry every record, volumes gzipped but the last)", []string{base}})
	}
	parts := filepath.Join(corpus, "archives/marks/parts")
	vs = append(vs, variant{"marks parts (entry every record)", []string{
		denseIndex(t, filepath.Join(parts, "part_a"), 1), denseIndex(t, filepath.Join(parts, "part_b"), 1)}})
	if len(vs) < 20 {
		t.Fatalf("only %d archives", len(vs))
	}

	var fromIndex, fromStart, restarts, fetches, saved int
	starts := 12 // first fetch times per archive
	if !longtest.Enabled() {
		starts = 4
	}
	for _, v := range vs {
		times := recordTimes(t, v.bases)
		step := max(1, len(times)/starts)
		vIndex, vStart := 0, 0
		for i := 0; i < len(times); i += step {
			for _, d := range []time.Duration{-time.Millisecond, 0, time.Millisecond} {
				start := times[i].Add(d)
				// the rule changes the answers, not the positioning: one
				// rule per start time, in turn
				for _, rule := range []semantics.InterpRule{[]semantics.InterpRule{semantics.InterpNearest, semantics.InterpPrior}[i/step%2]} {
					want, nFull, _ := positionRun(t, v.bases, rule, start, true)
					got, n, rs := positionRun(t, v.bases, rule, start, false)
					fetches++
					vIndex += n
					vStart += nFull
					restarts += rs
					if d := diffRows(want, got); d != "" {
						t.Errorf("%s %s from %s: index positioning differs from the full scan (%d rows wanted, %d got):%s",
							v.name, rule, start.UTC().Format(time.RFC3339Nano), len(want), len(got), d)
					}
				}
			}
		}
		fromIndex += vIndex
		fromStart += vStart
		if vIndex*2 < vStart {
			saved++
		}
	}
	t.Logf("%d first fetches: %d records applied positioning from the index, %d from the start; %d restarts", fetches, fromIndex, fromStart, restarts)
	// archives with metrics logged once at the start (live, mmvchurn) are
	// read back to the start for them, as libpcp's backward search reads
	if saved < 15 {
		t.Errorf("positioning from the index applied less than half the records of positioning from the start for only %d archives of %d", saved, len(vs))
	}
	if restarts == 0 {
		t.Error("no positioning ever started over from the archive's start: the restamped archives do not exercise it")
	}
}

// TestReplayFailedFirstFetch: a first fetch whose positioning fails (a
// corrupt record on the way) leaves no reader or goroutine behind, and a
// retry fails the same way.
func TestReplayFailedFirstFetch(t *testing.T) {
	base := archivetest.CopyArchive(t, filepath.Join(corpus, "archives/live/live"), t.TempDir())
	times := recordTimes(t, []string{base})
	vb, err := os.ReadFile(base + ".0")
	if err != nil {
		t.Fatal(err)
	}
	var recs []int
	for pos := int(be32(vb)); pos+16 <= len(vb); pos += int(be32(vb[pos:])) {
		recs = append(recs, pos)
	}
	put32(vb, recs[21]-4, 12345) // record 20's trailer
	if err := os.WriteFile(base+".0", vb, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, full := range []bool{false, true} {
		a, err := pcplog.Open(base)
		if err != nil {
			t.Fatal(err)
		}
		rp, err := NewReplay([]*pcplog.Archive{a}, ReplayOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rp.test = &replayTest{fullScan: full}
		var pmids []semantics.PMID
		for _, m := range rp.Metrics() {
			pmids = append(pmids, m.Desc.PMID)
		}
		var res source.Result
		g0 := runtime.NumGoroutine()
		var first string
		for k := 0; k < 5; k++ {
			err := rp.Fetch(times[len(times)-5], pmids, &res)
			if err == nil || !strings.Contains(err.Error(), "trailer") {
				t.Fatalf("full scan %v: fetch %d: %v, want the corrupt trailer", full, k, err)
			}
			if k == 0 {
				first = err.Error()
			} else if err.Error() != first {
				t.Errorf("full scan %v: retry %d: %v, first %s", full, k, err, first)
			}
		}
		time.Sleep(50 * time.Millisecond) // goroutines told to stop have
		if g := runtime.NumGoroutine(); g > g0 {
			t.Errorf("full scan %v: %d goroutines after 5 failed first fetches, %d before", full, g, g0)
		}
		rp.Close()
	}
}

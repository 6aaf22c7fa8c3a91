package archive

import (
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/archive/internal/archivetest"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

// libpcpAt reads libpcp's answers (a corpus interp or records CSV) by time
// and metric.
func libpcpAt(t *testing.T, file string) map[string]map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(corpus, "archives", file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]string{}
	for _, r := range rows[1:] {
		if out[r[1]] == nil {
			out[r[1]] = map[string]string{}
		}
		if r[7] == "ok" {
			out[r[1]][r[2]] = r[6]
		}
	}
	return out
}

// served returns the values of a Follow's answer as libpcp's CSV prints them.
func served(t *testing.T, f *Follow, now time.Time) map[string]string {
	t.Helper()
	var pmids []semantics.PMID
	var names []string
	for _, m := range f.Metrics() {
		pmids = append(pmids, m.Desc.PMID)
		names = append(names, m.Name)
	}
	var res source.Result
	if err := f.Fetch(now, pmids, &res); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for i, s := range res.Sets {
		if s.Err == nil && len(s.Values) == 1 {
			v := s.Values[0].Value
			switch v.Type() {
			case semantics.TypeDouble:
				out[names[i]] = strconv.FormatFloat(v.Float64(), 'f', -1, 64)
				if !strings.Contains(out[names[i]], ".") {
					out[names[i]] += ".0"
				}
			case semantics.TypeString:
				out[names[i]] = v.Str()
			default:
				out[names[i]] = strconv.FormatUint(v.Uint64(), 10)
			}
		}
	}
	return out
}

func sameValues(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if len(want) == 0 {
		t.Fatalf("%s: no libpcp answer", what)
	}
	for m, w := range want {
		if got[m] != w {
			t.Errorf("%s: %s = %q, libpcp %q", what, m, got[m], w)
		}
	}
}

// TestFollowDirectory follows a directory where pmlogger wrote part_a and
// later starts part_b (the corpus's marks parts: 10 s logging intervals,
// a gap from 50 s to 190 s): values at now minus the delay as libpcp
// interpolates them, the latest values past the end, the move to the new
// archive once the served time reaches its start, the lag, and stalled.
func TestFollowDirectory(t *testing.T) {
	dir := t.TempDir()
	archivetest.CopyArchive(t, filepath.Join(corpus, "archives", "marks/parts", "part_a"), dir)
	interp := libpcpAt(t, "marks/expected/marks.t1-S0.5.interp.csv") // prior rule (PCP 6.0.3)
	records := libpcpAt(t, "marks/expected/marks.records.csv")
	const delay = 5 * time.Second
	f := NewFollow(dir, FollowOptions{Delay: delay, Interp: semantics.InterpPrior})
	defer f.Close()
	start := time.Unix(1704067200, 0)
	at := func(secs float64) time.Time { return start.Add(time.Duration(secs * float64(time.Second))) }
	epoch := f.Epoch()
	for _, s := range []float64{0.5, 20.5, 33.5, 49.5} {
		now := at(s).Add(delay)
		sameValues(t, "at +"+strconv.FormatFloat(s, 'f', -1, 64), served(t, f, now), interp[strconv.FormatInt(at(s).Unix(), 10)+".500000000"])
		if st := f.Status(now); st.Reason != source.ReasonUp || st.Lag != delay {
			t.Errorf("+%v: status %+v, want up with lag %v", s, st, delay)
		}
	}
	// the time served is to the microsecond, the Result says which
	var res source.Result
	if err := f.Fetch(at(49.5).Add(delay+567), nil, &res); err != nil || !res.Time.Equal(at(49.5)) {
		t.Errorf("served %v (%v), want %v: the time to the microsecond", res.Time, err, at(49.5))
	}
	// past the end of part_a: its last record (the counter and the
	// instant: the string keeps "sample 4" at 50 s after a fetch at 49.5 s,
	// as libpcp's does with the same fetches, its bounds kept)
	last := records["1704067250.000000000"]
	delete(last, "marks.text")
	now := at(70).Add(delay)
	sameValues(t, "past the end", served(t, f, now), last)
	if st := f.Status(now); st.Lag != 25*time.Second {
		t.Errorf("past the end: lag %v, want 25s (the served time is the last record's)", st.Lag)
	}
	// pmlogger starts part_b: followed once the served time reaches its start
	archivetest.CopyArchive(t, filepath.Join(corpus, "archives", "marks/parts", "part_b"), dir)
	sameValues(t, "before part_b's start", served(t, f, at(150).Add(delay)), last)
	if f.Epoch() != epoch {
		t.Error("moved to part_b before the served time reached its start")
	}
	switched := at(200.5).Add(delay)
	sameValues(t, "in part_b", served(t, f, switched), interp["1704067400.500000000"])
	if f.Epoch() == epoch {
		t.Error("still on part_a")
	}
	if st := f.Status(switched); st.Reason != source.ReasonUp {
		t.Errorf("in part_b: %+v", st)
	}
	// no record added for 3 logging intervals (10 s) plus 2 s of wall time
	// since part_b appeared
	if st := f.Status(switched.Add(31 * time.Second)); st.Reason != source.ReasonUp {
		t.Errorf("31 s after the last growth: %+v, want up", st)
	}
	if st := f.Status(switched.Add(33 * time.Second)); st.Reason != source.ReasonStalled || !strings.Contains(st.Detail, "part_b") {
		t.Errorf("33 s after the last growth: %+v, want stalled naming part_b", st)
	}
}

// TestFollowLatest: pmlogger_check's Latest folio names the archive to
// follow, whatever the label starts say.
func TestFollowLatest(t *testing.T) {
	dir := t.TempDir()
	archivetest.CopyArchive(t, filepath.Join(corpus, "archives", "marks/parts", "part_a"), dir)
	archivetest.CopyArchive(t, filepath.Join(corpus, "archives", "marks/parts", "part_b"), dir)
	if n, err := pcplog.Newest(dir, nil); err != nil || filepath.Base(n) != "part_b" {
		t.Errorf("newest by label start: %q, %v; want part_b", n, err)
	}
	folio := "PCPFolio\nVersion: 1\n# use pmafm(1) to process this PCP archive folio\n#\nCreated: on corpus-host\nCreator: pmlogger_check\n#\t\tHost\t\t\tBasename\n#\nArchive:\tcorpus-host\t\tpart_a\n"
	if err := os.WriteFile(filepath.Join(dir, "Latest"), []byte(folio), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := pcplog.Newest(dir, nil); err != nil || n != filepath.Join(dir, "part_a") {
		t.Errorf("newest by Latest: %q, %v; want part_a", n, err)
	}
	f := NewFollow(dir, FollowOptions{})
	defer f.Close()
	if !f.Writing(time.Now().Add(1000 * time.Hour)) {
		t.Error("a directory with Latest is followed")
	}
}

// TestFollowMissing: a path that names nothing is reported missing, by the
// name given, until an archive appears there.
func TestFollowMissing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "host")
	f := NewFollow(dir, FollowOptions{})
	defer f.Close()
	now := time.Now()
	st := f.Status(now)
	if st.Reason != source.ReasonMissing || !strings.Contains(st.Detail, dir) {
		t.Errorf("missing directory: %+v", st)
	}
	if len(f.Metrics()) != 0 {
		t.Error("metrics from nothing")
	}
	var res source.Result
	if err := f.Fetch(now, []semantics.PMID{1}, &res); err != nil || len(res.Sets) != 1 || len(res.Sets[0].Values) != 0 {
		t.Errorf("fetch from nothing: %v %+v", err, res)
	}
	if !f.Writing(now) {
		t.Error("a missing path is followed (until it appears)")
	}
	os.Mkdir(dir, 0o755)
	f.Epoch()
	if st := f.Status(now); st.Reason != source.ReasonMissing || !strings.Contains(st.Detail, "no archive") {
		t.Errorf("empty directory: %+v", st)
	}
	archivetest.CopyArchive(t, filepath.Join(corpus, "archives", "marks/parts", "part_a"), dir)
	e := f.Epoch()
	if st := f.Status(time.Now()); st.Reason != source.ReasonUp || len(f.Metrics()) != 3 || e == 0 {
		t.Errorf("after the archive appeared: %+v, %d metrics, epoch %d", st, len(f.Metrics()), e)
	}
	// an archive name with a typo is reported under that name
	typo := filepath.Join(dir, "part_x")
	if st := NewFollow(typo, FollowOptions{}).Status(now); st.Reason != source.ReasonMissing || !strings.HasPrefix(st.Detail, typo+":") {
		t.Errorf("typo: %+v", st)
	}
}

// TestFollowGrowing follows an archive as its volume grows record by record
// (the corpus's live recording cut at a record boundary, then completed):
// stalled while it does not grow, up again when it does.
func TestFollowGrowing(t *testing.T) {
	dir := t.TempDir()
	archivetest.CopyArchive(t, filepath.Join(corpus, "archives", "live", "live"), dir)
	vol := filepath.Join(dir, "live.0")
	full, _ := os.ReadFile(vol)
	a, err := pcplog.Open(filepath.Join(dir, "live"))
	if err != nil {
		t.Fatal(err)
	}
	offs, times := recordsOf(a)
	if len(offs) < 20 {
		t.Fatalf("%d records", len(offs))
	}
	half := len(offs) / 2
	os.WriteFile(vol, full[:offs[half]], 0o644)
	// the index's entries past the cut point at records not written yet
	os.Remove(filepath.Join(dir, "live.index"))
	f := NewFollow(filepath.Join(dir, "live"), FollowOptions{})
	defer f.Close()
	// pmlogger logged the live recording every second (pmdumplog: a
	// record of 75 metrics every 1.000 s)
	iv := time.Second
	if f.interval != iv {
		t.Errorf("logging interval %v, want %v", f.interval, iv)
	}
	grown := time.Now()
	stall := StallIntervals*iv + StallMargin
	var pmids []semantics.PMID
	for _, m := range f.Metrics() {
		pmids = append(pmids, m.Desc.PMID)
	}
	var res source.Result
	if err := f.Fetch(grown.Add(stall-time.Second), pmids, &res); err != nil {
		t.Fatal(err)
	}
	if !res.Time.Equal(times[half-1]) {
		t.Errorf("served %v, want the last record %v", res.Time, times[half-1])
	}
	if st := f.Status(grown.Add(stall + time.Second)); st.Reason != source.ReasonStalled {
		t.Errorf("no growth for %v: %+v", stall+time.Second, st)
	}
	os.WriteFile(vol, full, 0o644)
	later := grown.Add(stall + 2*time.Second)
	if err := f.Fetch(later, pmids, &res); err != nil {
		t.Fatal(err)
	}
	if st := f.Status(later); st.Reason != source.ReasonUp {
		t.Errorf("after growth: %+v", st)
	}
	if !res.Time.Equal(times[len(times)-1]) {
		t.Errorf("served %v, want the new last record %v", res.Time, times[len(times)-1])
	}
}

// TestFind: directories, farms and names the user gave.
func TestFind(t *testing.T) {
	root := t.TempDir()
	for _, h := range []string{"a", "b"} {
		os.Mkdir(filepath.Join(root, h), 0o755)
		archivetest.CopyArchive(t, filepath.Join(corpus, "archives", "marks/parts", "part_a"), filepath.Join(root, h))
	}
	archivetest.CopyArchive(t, filepath.Join(corpus, "archives", "marks/parts", "part_b"), filepath.Join(root, "b"))
	os.Mkdir(filepath.Join(root, "empty"), 0o755)
	if got := pcplog.HostDirs(root); len(got) != 2 || got[0] != filepath.Join(root, "a") || got[1] != filepath.Join(root, "b") {
		t.Errorf("farm: %v", got)
	}
	if got := pcplog.HostDirs(filepath.Join(root, "b")); len(got) != 1 {
		t.Errorf("host directory: %v", got)
	}
	if got, err := pcplog.Find(filepath.Join(root, "b")); err != nil || len(got) != 2 {
		t.Errorf("Find(dir): %v %v", got, err)
	}
	for _, p := range []string{filepath.Join(root, "b", "part_c"), filepath.Join(root, "nope", "part_a")} {
		if _, err := pcplog.Find(p); err == nil || !strings.HasPrefix(err.Error(), p+": no such archive") {
			t.Errorf("Find(%s): %v", p, err)
		}
	}
	// pmlogger_daily compresses the older archives of a directory: a
	// replay of the directory reads them; the newest plain one is followed
	archivetest.CopyArchive(t, filepath.Join(corpus, "archives", "compressed", "multivol_xz"), filepath.Join(root, "b"))
	if got, err := pcplog.Find(filepath.Join(root, "b")); err != nil || len(got) != 3 || filepath.Base(got[0]) != "multivol_xz" {
		t.Errorf("Find(dir with a compressed archive): %v %v", got, err)
	}
	if as, err := pcplog.OpenAll([]string{filepath.Join(root, "b")}); err != nil || len(as) != 3 {
		t.Errorf("OpenAll: %d archives, %v", len(as), err)
	}
	if n, err := pcplog.Newest(filepath.Join(root, "b"), nil); err != nil || filepath.Base(n) != "part_b" {
		t.Errorf("Newest: %q %v", n, err)
	}
	if _, err := pcplog.Find(filepath.Join(root, "empty")); err == nil || !strings.Contains(err.Error(), "no archive in this directory") {
		t.Errorf("Find(empty): %v", err)
	}
	followed, replay := FollowWritten([]string{root, filepath.Join(root, "missing")}, FollowOptions{}, time.Now().Add(1000*time.Hour))
	for _, f := range followed {
		f.Close()
	}
	// the hosts' archives ended long ago: replayed; the missing path followed
	if len(followed) != 1 || followed[0].Path() != filepath.Join(root, "missing") || len(replay) != 2 {
		t.Errorf("followed %d, replay %v", len(followed), replay)
	}
}

// TestFollowMetadataGrows: an archive opened while its .meta holds only
// its first records (pmlogger just started) is opened again when more
// metrics are described.
func TestFollowMetadataGrows(t *testing.T) {
	dir := t.TempDir()
	base := archivetest.CopyArchive(t, filepath.Join(corpus, "archives", "marks", "parts", "part_a"), dir)
	full, err := os.ReadFile(base + ".meta")
	if err != nil {
		t.Fatal(err)
	}
	// the label, then the first record only (a descriptor)
	first := pcplog.LabelLenV2 + int(be32(full[pcplog.LabelLenV2:]))
	if err := os.WriteFile(base+".meta", full[:first], 0o644); err != nil {
		t.Fatal(err)
	}
	f := NewFollow(dir, FollowOptions{})
	defer f.Close()
	if n := len(f.Metrics()); n != 1 {
		t.Fatalf("%d metrics from the first record, want 1", n)
	}
	epoch := f.Epoch()
	if err := os.WriteFile(base+".meta", full, 0o644); err != nil {
		t.Fatal(err)
	}
	var res source.Result
	if err := f.Fetch(time.Now(), nil, &res); err != nil {
		t.Fatal(err)
	}
	if n := len(f.Metrics()); n != 3 || f.Epoch() == epoch {
		t.Errorf("%d metrics (epoch %d, was %d) after the .meta grew, want 3 and a new epoch", n, f.Epoch(), epoch)
	}
	if got := served(t, f, time.Unix(1704067250, 0).Add(time.Hour)); got["marks.counter"] != "25425" {
		t.Errorf("values after reopening: %v", got)
	}
}

// TestFollowGrownSlowerGroup: a metric of a slower logging group (the live
// recording's proc.nprocs, every 7 s among records every second) has no
// upper bound when a fetch is clipped to the last record; once the volume
// has grown, a later fetch interpolates it again with the records added
// (libpcp's "no values after" time, learnt at the old end, is forgotten).
func TestFollowGrownSlowerGroup(t *testing.T) {
	dir := t.TempDir()
	archivetest.CopyArchive(t, filepath.Join(corpus, "archives", "live", "live"), dir)
	vol := filepath.Join(dir, "live.0")
	full, _ := os.ReadFile(vol)
	a, err := pcplog.Open(filepath.Join(dir, "live"))
	if err != nil {
		t.Fatal(err)
	}
	start := a.Label().Start
	var cut int64
	r := a.Records()
	for r.Next() {
		// the volume up to 08:57:40.416191 (13.020400 s): proc.nprocs last
		// logged at 7.021209 s, next at 21.021033 s
		if r.Record().Time.Sub(start) > 13100*time.Millisecond {
			cut = r.Record().Off
			break
		}
	}
	r.Close()
	a.Close()
	os.WriteFile(vol, full[:cut], 0o644)
	os.Remove(filepath.Join(dir, "live.index")) // its entries past the cut
	const delay = 2 * time.Second
	f := NewFollow(filepath.Join(dir, "live"), FollowOptions{Delay: delay, Interp: semantics.InterpNearest})
	defer f.Close()
	served(t, f, start.Add(15*time.Second).Add(delay)) // clipped to 13.020400 s
	os.WriteFile(vol, full, 0o644)
	// libpcp 7.2.1 (the nearest rule) at +18.5 s: 93, the value logged at
	// 21.021033 s (the latest recorded, 91 at 14.028598 s, is farther)
	want := libpcpAt(t, "live/expected/live.t1-S0.5.interp.nearest.csv")
	at := start.Add(18500 * time.Millisecond)
	got := served(t, f, at.Add(delay))
	key := strconv.FormatInt(at.Unix(), 10) + "." + fmt.Sprintf("%09d", at.Nanosecond())
	if w := want[key]["proc.nprocs"]; w != "93" || got["proc.nprocs"] != w {
		t.Errorf("proc.nprocs at +18.5 s after growth: %q, libpcp %q (want 93)", got["proc.nprocs"], w)
	}
}

// recordsOf returns the offset and time of each of a's records.
func recordsOf(a *pcplog.Archive) ([]int64, []time.Time) {
	var offs []int64
	var times []time.Time
	r := a.Records()
	for r.Next() {
		offs = append(offs, r.Record().Off)
		times = append(times, r.Record().Time)
	}
	r.Close()
	return offs, times
}

package pcplog

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source/archive/internal/archivetest"
)

// TestInstancesAtMatchesPmdumplog compares the instance domain in force at
// each indom record time (deltas applied) with `pmdumplog -i`.
func TestInstancesAtMatchesPmdumplog(t *testing.T) {
	t.Parallel()
	for _, mr := range manifestRows(t, "pmdumplog", func(a string) bool { return strings.HasPrefix(a, "-i ") }) {
		t.Run(mr[0], func(t *testing.T) {
			a, err := Open(filepath.Join(corpus, mr[0]))
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(corpus, mr[1]))
			if err != nil {
				t.Fatal(err)
			}
			checked := archivetest.CheckInDomsAgainstPmdumplog(t, a, a.Label().Start, b)
			total := 0
			for _, m := range a.Metrics() {
				if m.Desc.InDom != semantics.InDomNull {
					total++
				}
			}
			if checked == 0 && total > 0 {
				t.Errorf("no indom records checked")
			}
		})
	}
}

var reIndexLine = regexp.MustCompile(`^(\d\d:\d\d:\d\d\.\d+)\s+(\d+)\s+(\d+)\s+(\d+)$`)

// TestIndexMatchesPmdumplog compares the temporal index with `pmdumplog -t`.
func TestIndexMatchesPmdumplog(t *testing.T) {
	for _, mr := range manifestRows(t, "pmdumplog", func(a string) bool { return strings.HasPrefix(a, "-t ") }) {
		t.Run(mr[0], func(t *testing.T) {
			a, err := Open(filepath.Join(corpus, mr[0]))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(filepath.Join(corpus, mr[1]))
			var want []string
			for _, line := range strings.Split(string(b), "\n") {
				if m := reIndexLine.FindStringSubmatch(line); m != nil {
					tm := archivetest.TodTime(t, a.Label().Start, m[1])
					want = append(want, fmt.Sprintf("%d %s %s %s", tm.UnixNano(), m[2], m[3], m[4]))
				}
			}
			var got []string
			for _, e := range a.Index() {
				got = append(got, fmt.Sprintf("%d %d %d %d", e.Time.UnixNano(), e.Vol, e.MetaOff, e.DataOff))
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("index:\n got %q\nwant %q", got, want)
			}
		})
	}
}

var (
	reLabelVer   = regexp.MustCompile(`Log Format Version (\d)`)
	reLabelHost  = regexp.MustCompile(`Performance metrics from host (.*)`)
	reLabelStart = regexp.MustCompile(`commencing (.*)`)
	reLabelEnd   = regexp.MustCompile(`ending     (.*)`)
	reLabelTZ    = regexp.MustCompile(`Archive timezone: (.*)`)
	reLabelZI    = regexp.MustCompile(`Archive zoneinfo: (.*)`)
	reLabelPID   = regexp.MustCompile(`PID for pmlogger: (\d+)`)
)

// TestLabelMatchesPmdumplog compares Label and End with `pmdumplog -L`.
func TestLabelMatchesPmdumplog(t *testing.T) {
	for _, mr := range manifestRows(t, "pmdumplog", func(a string) bool { return strings.HasPrefix(a, "-L ") }) {
		t.Run(mr[0], func(t *testing.T) {
			a, err := Open(filepath.Join(corpus, mr[0]))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(filepath.Join(corpus, mr[1]))
			s := string(b)
			get := func(re *regexp.Regexp) string {
				if m := re.FindStringSubmatch(s); m != nil {
					return m[1]
				}
				return ""
			}
			l := a.Label()
			end, err := a.End()
			if err != nil {
				t.Fatal(err)
			}
			digits := 6
			if l.Version == 3 {
				digits = 9
			}
			layout := "Mon Jan _2 15:04:05." + strings.Repeat("0", digits) + " 2006"
			got := []string{strconv.Itoa(l.Version), l.Hostname, l.Start.UTC().Format(layout), end.UTC().Format(layout), l.Timezone, l.Zoneinfo, strconv.Itoa(int(l.PID))}
			want := []string{get(reLabelVer), get(reLabelHost), get(reLabelStart), get(reLabelEnd), get(reLabelTZ), get(reLabelZI), get(reLabelPID)}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("label:\n got %q\nwant %q", got, want)
			}
		})
	}
}

// TestRecordsFrom checks that a seek with the index starts at or before t
// and that reading on gives the same records as a full scan.
func TestRecordsFrom(t *testing.T) {
	for _, name := range []string{"live/live", "live/live_v3", "multivol/multivol_v3", "compressed/multivol_xz"} {
		a, err := Open(filepath.Join(corpus, "archives", name))
		if err != nil {
			t.Fatal(err)
		}
		var all []string
		var times []time.Time
		r := a.Records()
		for r.Next() {
			rec := r.Record()
			all = append(all, fmt.Sprintf("%d/%d %s %d", rec.Vol, rec.Off, rec.Time.Format(time.RFC3339Nano), len(rec.Sets)))
			times = append(times, rec.Time)
		}
		if r.Err() != nil {
			t.Fatal(r.Err())
		}
		for i := 0; i < len(times); i += 7 {
			at := times[i]
			rf := a.RecordsFrom(at)
			var got []string
			for rf.Next() {
				rec := rf.Record()
				got = append(got, fmt.Sprintf("%d/%d %s %d", rec.Vol, rec.Off, rec.Time.Format(time.RFC3339Nano), len(rec.Sets)))
			}
			if rf.Err() != nil {
				t.Fatal(rf.Err())
			}
			rf.Close()
			if len(got) < len(all)-i || strings.Join(got, "\n") != strings.Join(all[len(all)-len(got):], "\n") {
				t.Fatalf("%s from %s: %d records, not a suffix of the %d starting at or before it", name, at, len(got), len(all)-i)
			}
			if len(got) > len(all)-i && len(a.Index()) > 0 {
				// the first record must be that of an index entry <= t
				first := all[len(all)-len(got)]
				found := false
				for _, e := range a.Index() {
					if !e.Time.After(at) && strings.HasPrefix(first, fmt.Sprintf("%d/%d ", e.Vol, e.DataOff)) {
						found = true
					}
				}
				if !found {
					t.Errorf("%s from %s: starts at %s, not at an index entry", name, at, first)
				}
			}
		}
	}
}

// TestRefreshFollowsGrowingArchive simulates pmlogger writing: the archive is
// opened while its files are cut in the middle of records, then the rest is
// appended; after Refresh the same Reader continues with the new records and
// the new metadata.
func TestRefreshFollowsGrowingArchive(t *testing.T) {
	for _, name := range []string{"mmvchurn/mmvchurn_v3", "mmvchurn/mmvchurn"} {
		src := filepath.Join(corpus, "archives", name)
		full, err := Open(src)
		if err != nil {
			t.Fatal(err)
		}
		want := recordRows(t, full)
		dir := t.TempDir()
		base := archivetest.CopyArchive(t, src, dir)
		orig := map[string][]byte{}
		for _, ext := range []string{".0", ".meta", ".index"} {
			b, _ := os.ReadFile(base + ext)
			orig[ext] = b
			lsz := LabelSize(full.Label().Version)
			cut := lsz + (len(b)-lsz)/2
			if ext == ".meta" {
				cut = lsz + (len(b)-lsz)/3
			}
			if err := os.WriteFile(base+ext, b[:cut], 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := Open(base); err == nil || !strings.Contains(err.Error(), "cut short") {
			t.Fatalf("Open of a finished archive whose .meta is cut: %v, want a cut-short error", err)
		}
		a, err := OpenLive(base)
		if err != nil {
			t.Fatal(err)
		}
		r := a.Records()
		n1 := 0
		for r.Next() {
			n1++
		}
		if r.Err() != nil {
			t.Fatal(r.Err())
		}
		m1 := len(a.Metrics())
		for ext, b := range orig {
			if err := os.WriteFile(base+ext, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if r.Next() && len(a.Metrics()) != m1 {
			t.Fatal("metadata changed without Refresh")
		}
		r.Close()
		if err := a.Refresh(); err != nil {
			t.Fatal(err)
		}
		if len(a.Metrics()) != len(full.Metrics()) || len(a.Index()) != len(full.Index()) {
			t.Errorf("after Refresh: %d metrics, %d index entries; want %d, %d", len(a.Metrics()), len(a.Index()), len(full.Metrics()), len(full.Index()))
		}
		// a reader that stopped at the cut continues after Refresh
		r = a.Records()
		for i := 0; i < n1; i++ {
			r.Next()
		}
		rest := 0
		for r.Next() {
			rest++
		}
		if r.Err() != nil {
			t.Fatal(r.Err())
		}
		if got := recordRows(t, a); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: records after Refresh differ from the full archive", name)
		}
		if n1 == 0 || rest == 0 {
			t.Errorf("%s: %d records before the cut, %d after", name, n1, rest)
		}
	}
}

// TestReaderContinuesAfterGrowth: a Reader at the end of the last volume
// sees records appended later on its next call to Next.
func TestReaderContinuesAfterGrowth(t *testing.T) {
	src := filepath.Join(corpus, "archives/seedtables/seedtables")
	dir := t.TempDir()
	base := archivetest.CopyArchive(t, src, dir)
	b, _ := os.ReadFile(base + ".0")
	cut := len(b) - 30 // inside the last record
	if err := os.WriteFile(base+".0", b[:cut], 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := Open(base)
	if err != nil {
		t.Fatal(err)
	}
	r := a.Records()
	defer r.Close()
	n := 0
	for r.Next() {
		n++
	}
	f, _ := os.OpenFile(base+".0", os.O_APPEND|os.O_WRONLY, 0)
	f.Write(b[cut:])
	f.Close()
	if !r.Next() || r.Next() || r.Err() != nil {
		t.Errorf("after growth: want exactly one more record (had %d), err %v", n, r.Err())
	}
}

// TestRefreshConcurrent: metadata accessors and a Reader in other goroutines
// while Refresh runs (for -race).
func TestRefreshConcurrent(t *testing.T) {
	a, err := Open(filepath.Join(corpus, "archives/mmvchurn/mmvchurn_v3"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 20; i++ {
			if err := a.Refresh(); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i := 0; i < 5; i++ {
		for _, m := range a.Metrics() {
			a.Instances(m.Desc.InDom)
			a.OneLine(m.Desc.PMID)
		}
		r := a.Records()
		for r.Next() {
		}
		if r.Err() != nil {
			t.Fatal(r.Err())
		}
		r.Close()
	}
	<-done
}

package bridge

import (
	"bytes"
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/source/archive"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

// The expected counter starts come from PCP's tools, in the corpus:
// `pmdumplog -l` (the label's start), `pmdumplog -M` (the <mark> records)
// and pmfetch_interp's records (the value before a reset).

var (
	reCommencing = regexp.MustCompile(`commencing (.*)`)
	reMarkLine   = regexp.MustCompile(`(?m)^(\d\d:\d\d:\d\d\.\d+)\s+<mark>`)
)

// dumplog returns archive name's label start and mark times as pmdumplog
// prints them (expected/ next to the archive; marks on the label's day).
func dumplog(t *testing.T, dir, name string) (start time.Time, marks []time.Time) {
	t.Helper()
	exp := filepath.Join(corpus, "archives", dir, "expected", name)
	l, err := os.ReadFile(exp + ".pmdumplog-l.txt")
	if err != nil {
		t.Fatal(err)
	}
	m := reCommencing.FindSubmatch(l)
	if m == nil {
		t.Fatalf("%s: no label start", name)
	}
	if start, err = time.Parse("Mon Jan _2 15:04:05 2006", string(m[1])); err != nil {
		t.Fatal(err)
	}
	dump, err := os.ReadFile(exp + ".pmdumplog-M.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, mm := range reMarkLine.FindAllSubmatch(dump, -1) {
		tod, err := time.Parse("15:04:05", string(mm[1]))
		if err != nil {
			t.Fatal(err)
		}
		marks = append(marks, start.Truncate(24*time.Hour).Add(tod.Sub(tod.Truncate(24*time.Hour))))
	}
	return start, marks
}

// resetOf returns the times of the value before the first fall of a
// singular metric's values in an archive's records (pmfetch_interp -U) and
// of the value after it.
func resetOf(t *testing.T, dir, name, metric string) (before, after time.Time) {
	t.Helper()
	f, err := os.Open(filepath.Join(corpus, "archives", dir, "expected", name+".records.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	last, lastT := -1.0, ""
	for _, r := range rows[1:] {
		if r[2] != metric {
			continue
		}
		v, err := strconv.ParseFloat(r[6], 64)
		if err != nil {
			t.Fatal(err)
		}
		if v < last {
			return unixString(t, lastT), unixString(t, r[1])
		}
		last, lastT = v, r[1]
	}
	t.Fatalf("%s: no reset of %s", name, metric)
	return
}

func unixString(t *testing.T, s string) time.Time {
	sec, frac, _ := bytes.Cut([]byte(s), []byte("."))
	n, err := strconv.ParseInt(string(sec), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	ns, _ := strconv.ParseInt(string(frac), 10, 64)
	return time.Unix(n, ns).UTC()
}

// replayAt returns an archive replay as a Source served at *when.
func replayAt(t *testing.T, path string, when *time.Time) (Source, *archive.Replay) {
	t.Helper()
	a, err := pcplog.Open(filepath.Join(corpus, "archives", path))
	if err != nil {
		t.Fatal(err)
	}
	rp, err := archive.NewReplay([]*pcplog.Archive{a}, archive.ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rp.Close() })
	return Source{Name: path, Src: rp, When: func(time.Time) (time.Time, bool) { return *when, true }}, rp
}

// TestArchiveCounterStarts scrapes (OpenMetrics with _created) and pushes
// (OTLP) archive replays at a series of times and checks one counter's
// start: the archive's start, the time of a <mark> once past it, the time
// of the value before a reset once the counter went down.
func TestArchiveCounterStarts(t *testing.T) {
	marksStart, marks := dumplog(t, "marks", "marks")
	if len(marks) != 1 {
		t.Fatalf("marks: %d marks in pmdumplog -M", len(marks))
	}
	indomsStart, _ := dumplog(t, "indoms", "indoms")
	before, after := resetOf(t, "indoms", "indoms", "indoms.reset")
	// every 5 s through each archive (as a scrape would go), then back
	var marksSteps, indomsSteps []time.Time
	for d := time.Duration(0); d <= 240*time.Second; d += 5 * time.Second {
		marksSteps = append(marksSteps, marksStart.Add(d))
	}
	for d := 5 * time.Second; d <= 70*time.Second; d += 5 * time.Second {
		indomsSteps = append(indomsSteps, indomsStart.Add(d))
	}
	for _, tc := range []struct {
		path, metric, family string
		steps                []time.Time
		want                 func(at time.Time) time.Time
	}{
		{"marks/marks", "marks.counter", "marks_bytes", append(marksSteps, marksStart.Add(10*time.Second)),
			func(at time.Time) time.Time {
				if at.Before(marks[0]) {
					return marksStart
				}
				return marks[0]
			}},
		{"indoms/indoms", "indoms.reset", "indoms_reset", append(indomsSteps, indomsStart.Add(10*time.Second)),
			func(at time.Time) time.Time {
				if at.Before(after) || at.Equal(indomsStart.Add(10*time.Second)) {
					return indomsStart
				}
				return before
			}},
	} {
		t.Run(tc.metric, func(t *testing.T) {
			var when time.Time
			src, _ := replayAt(t, tc.path, &when)
			c := New(mapper(t, mapping.NamingDefault), nil, src)
			psrc, _ := replayAt(t, tc.path, &when)
			p := NewOTelProducer(mapper(t, mapping.NamingDefault), nil, psrc)
			re := regexp.MustCompile(`(?m)^` + tc.family + `_created (\S+)$`)
			starts := map[time.Time]int{}
			for i, at := range tc.steps {
				when = at
				want := tc.want(at)
				var buf bytes.Buffer
				if err := c.WriteOpenMetrics(&buf, true); err != nil {
					t.Fatal(err)
				}
				m := re.FindSubmatch(buf.Bytes())
				if m != nil {
					starts[want]++
					if w := string(AppendStart(nil, want)); string(m[1]) != w {
						t.Errorf("at %v: %s_created %s, want %s (%v)", at.UTC(), tc.family, m[1], w, want.UTC())
					}
				} else if i == 0 || i == len(tc.steps)-1 {
					t.Errorf("at %v: no %s_created in\n%s", at.UTC(), tc.family, buf.Bytes())
				}
				sm, err := p.Produce(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				found := false
				for _, pm := range sm[0].Metrics {
					if pm.Name == tc.metric {
						found = true
						if st := pm.Data.(metricdata.Sum[float64]).DataPoints[0].StartTime; !st.Equal(want) {
							t.Errorf("at %v: OTLP start %v, want %v", at.UTC(), st.UTC(), want.UTC())
						}
					}
				}
				if found != (m != nil) {
					t.Errorf("at %v: pushed %v, scraped %v", at.UTC(), found, m != nil)
				}
			}
			if len(starts) != 2 || starts[tc.want(tc.steps[0])] < 3 || starts[tc.want(tc.steps[len(tc.steps)-2])] < 3 {
				t.Errorf("starts checked: %v, want both at least 3 times", starts)
			}
		})
	}
}

package backfill

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"

	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

// TestOpenMetricsFile reads backfill OpenMetrics files of corpus archives
// with Prometheus's own parser: UNIT lines, info families, and the start
// of every counter sample (the _created sample that follows it) at the
// archive's start (pmdumplog -l), at the last <mark> before it (pmdumplog
// -a), or at the sample before a reset.
// (The parser's StartTimestamp caches one start per series, for scrapes:
// the _created samples are read as samples here.)
func TestOpenMetricsFile(t *testing.T) {
	for _, rel := range []string{"seedtables/seedtables", "types/types_v3", "live/live", "marks/marks", "indoms/indoms"} {
		t.Run(rel, func(t *testing.T) {
			labelStart, marks := dumplog(t, rel)
			var out bytes.Buffer
			if _, err := WriteOpenMetrics(context.Background(), Options{Archives: []*pcplog.Archive{openArchive(t, rel)}}, &out, true); err != nil {
				t.Fatal(err)
			}
			b := out.Bytes()
			if !bytes.HasSuffix(b, []byte("\n# EOF\n")) {
				t.Fatal("no # EOF at the end")
			}
			p := textparse.NewOpenMetricsParser(b, labels.NewSymbolTable())
			type state struct {
				lastT, start int64
				last         float64
			}
			series := map[string]*state{}
			var pending *state // the counter sample whose _created must follow
			var pendingT int64
			counters, units, infos := 0, 0, 0
			for {
				e, err := p.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("Prometheus's OpenMetrics parser: %v", err)
				}
				switch e {
				case textparse.EntryUnit:
					units++
				case textparse.EntryType:
					if _, typ := p.Type(); typ == "info" {
						infos++
					}
				case textparse.EntrySeries:
					var ls labels.Labels
					p.Labels(&ls)
					name := ls.Get("__name__")
					_, ts, v := p.Series()
					key := labels.NewBuilder(ls).Del("__name__").Labels().String()
					if base, ok := strings.CutSuffix(name, "_created"); ok {
						key = base + key
						if pending == nil || pending != series[key] || *ts != pendingT {
							t.Fatalf("%s at %d follows no sample of its counter", ls, *ts)
						}
						if got := int64(math.Round(v * 1000)); got != pending.start {
							t.Errorf("%s at %d: start %d, want %d", ls, *ts, got, pending.start)
						}
						pending = nil
						continue
					}
					if pending != nil {
						t.Fatalf("no _created after the counter sample before %s", ls)
					}
					base, ok := strings.CutSuffix(name, "_total")
					if !ok {
						continue
					}
					key = base + key
					st := series[key]
					if st == nil {
						st = &state{start: labelStart}
						series[key] = st
					} else if v < st.last {
						st.start = st.lastT
					}
					for _, m := range marks {
						if m > st.start && m <= *ts {
							st.start = m
						}
					}
					st.last, st.lastT = v, *ts
					pending, pendingT = st, *ts
					counters++
				}
			}
			if counters == 0 {
				t.Error("no counter samples")
			}
			if rel == "marks/marks" && len(marks) == 0 {
				t.Error("no mark in pmdumplog -a")
			}
			t.Logf("%d counter samples of %d series, %d UNIT lines, %d info families", counters, len(series), units, infos)
			if rel == "types/types_v3" && (units == 0 || infos == 0) {
				t.Errorf("%d UNIT lines, %d info families", units, infos)
			}
		})
	}
}

var (
	reCommencing = regexp.MustCompile(`commencing (.*)`)
	reMarkLine   = regexp.MustCompile(`(?m)^(\d\d:\d\d:\d\d\.\d+)\s+<mark>`)
)

// dumplog returns a corpus archive's label start and <mark> times, in
// milliseconds rounded as _created samples are read here, from pmdumplog
// -l and -a (marks on the label's day).
func dumplog(t *testing.T, rel string) (start int64, marks []int64) {
	t.Helper()
	exp := filepath.Join(corpus, "archives", filepath.Dir(rel), "expected", filepath.Base(rel))
	l, err := os.ReadFile(exp + ".pmdumplog-l.txt")
	if err != nil {
		t.Fatal(err)
	}
	m := reCommencing.FindSubmatch(l)
	if m == nil {
		t.Fatalf("%s: no label start", rel)
	}
	st, err := time.Parse("Mon Jan _2 15:04:05 2006", string(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	ms := func(t time.Time) int64 { return int64(math.Round(float64(t.UnixNano()) / 1e6)) }
	dump, err := os.ReadFile(exp + ".pmdumplog-a.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, mm := range reMarkLine.FindAllSubmatch(dump, -1) {
		tod, err := time.Parse("15:04:05", string(mm[1]))
		if err != nil {
			t.Fatal(err)
		}
		marks = append(marks, ms(st.Truncate(24*time.Hour).Add(tod.Sub(tod.Truncate(24*time.Hour)))))
	}
	return ms(st), marks
}

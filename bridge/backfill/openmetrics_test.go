package backfill

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"

	"github.com/pcp-exporter/pcp-exporter/source/archive"
)

// TestOpenMetricsFile reads backfill OpenMetrics files of corpus archives
// with Prometheus's own parser: UNIT lines, info families, and the start
// of every counter sample (the _created sample that follows it) at the
// series' first sample in the archive, or at the sample before a reset.
// (The parser's StartTimestamp caches one start per series, for scrapes:
// the _created samples are read as samples here.)
func TestOpenMetricsFile(t *testing.T) {
	for _, rel := range []string{"seedtables/seedtables", "types/types_v3", "live/live"} {
		t.Run(rel, func(t *testing.T) {
			var out bytes.Buffer
			if _, err := WriteOpenMetrics(context.Background(), Options{Archives: []*archive.Archive{openArchive(t, rel)}}, &out, true); err != nil {
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
						st = &state{start: *ts}
						series[key] = st
					} else if v < st.last {
						st.start = st.lastT
					}
					st.last, st.lastT = v, *ts
					pending, pendingT = st, *ts
					counters++
				}
			}
			if counters == 0 {
				t.Error("no counter samples")
			}
			t.Logf("%d counter samples of %d series, %d UNIT lines, %d info families", counters, len(series), units, infos)
			if rel == "types/types_v3" && (units == 0 || infos == 0) {
				t.Errorf("%d UNIT lines, %d info families", units, infos)
			}
		})
	}
}

package backfill

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"

	"github.com/pcp-exporter/pcp-exporter/bridge"
	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/source/archive"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

// TestPmproxyNamingValuesAsScraped backfills the corpus types and live
// archives at one time with the pmproxy naming, and scrapes a replay of
// them at that time: every sample has the scrape's value, FLOAT and
// DOUBLE ones rounded as pmproxy prints them (%.8g, %.16g) both ways. The
// backfill used to write them unrounded (kernel.all.load's FLOAT 0.07 as
// 0.07000000029802322 where the scrape serves 0.07): history and live data
// joined under the pmproxy naming did not meet.
func TestPmproxyNamingValuesAsScraped(t *testing.T) {
	naming := mapping.NamingPmproxy
	m, err := mapping.New(nil, mapping.Options{Naming: &naming})
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"types/types_v3", "live/live"} {
		t.Run(rel, func(t *testing.T) {
			a := openArchive(t, rel)
			at := a.Label().Start.Truncate(time.Second).Add(5 * time.Second)
			var back bytes.Buffer
			if _, err := WriteOpenMetrics(context.Background(), Options{Archives: []*pcplog.Archive{a}, Mapper: m, Step: time.Second, Start: at, Finish: at}, &back, false); err != nil {
				t.Fatal(err)
			}
			rp, err := archive.NewReplay([]*pcplog.Archive{openArchive(t, rel)}, archive.ReplayOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer rp.Close()
			col := bridge.New(m, nil, bridge.Source{Name: rel, Src: rp, When: func(time.Time) (time.Time, bool) { return at, true }})
			var scraped bytes.Buffer
			if err := col.WriteOpenMetrics(&scraped, false); err != nil {
				t.Fatal(err)
			}
			scraped.WriteString("# EOF\n") // the handler's, after the self-metrics
			want, got := omValues(t, scraped.Bytes()), omValues(t, back.Bytes())
			fractions := 0
			for k, w := range want {
				g, ok := got[k]
				if !ok {
					t.Errorf("%s: scraped, not backfilled", k)
					continue
				}
				if g != w && !(math.IsNaN(g) && math.IsNaN(w)) {
					t.Errorf("%s: backfilled %v, scraped %v", k, g, w)
				}
				if w != math.Trunc(w) {
					fractions++
				}
			}
			if len(want) < 20 || fractions < 3 {
				t.Fatalf("%d series compared, %d with a fraction", len(want), fractions)
			}
		})
	}
}

// omValues reads an OpenMetrics exposition's samples by series.
func omValues(t *testing.T, b []byte) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	p := textparse.NewOpenMetricsParser(b, labels.NewSymbolTable())
	for {
		e, err := p.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("OpenMetrics parser: %v", err)
		}
		if e == textparse.EntrySeries {
			var ls labels.Labels
			p.Labels(&ls)
			_, _, v := p.Series()
			out[ls.String()] = v
		}
	}
}

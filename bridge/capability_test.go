package bridge

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/pcp-exporter/pcp-exporter/derive"
	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/archive"
	"github.com/pcp-exporter/pcp-exporter/source/mmv"
	"github.com/pcp-exporter/pcp-exporter/source/mmv/mmvwrite"
)

// derivedOverMMV is an MMV directory of one file (counter mmv.a.value)
// wrapped in derived metrics, as serve --derived.config builds it.
func derivedOverMMV(t *testing.T) (*derive.Source, *mmvwrite.Writer) {
	t.Helper()
	dir := t.TempDir()
	w := writeValue(t, filepath.Join(dir, "a"), 1000)
	t.Cleanup(func() { w.Close() })
	d, err := mmv.OpenDir(dir, mmv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := derive.Parse("2 * mmv.a.value")
	if err != nil {
		t.Fatal(err)
	}
	defs := []derive.Definition{{Name: "twice", Expr: e}}
	ds, err := derive.Wrap(d, defs, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ds.Close() })
	return ds, w
}

// TestDerivedKeepsCapabilities: derived metrics over an MMV directory keep
// the directory's file counts (pcp_exporter_mmv_files) and its generations
// (the start time of OTLP counters), which a wrapper used to hide.
func TestDerivedKeepsCapabilities(t *testing.T) {
	ds, w := derivedOverMMV(t)
	out := string(exposition(t, New(mapper(t, mapping.NamingDefault), nil, Source{Name: "mmv", Src: ds})))
	for _, want := range []string{
		`pcp_exporter_mmv_files{exported="true",source="mmv"} 1`,
		`pcp_exporter_mmv_files{exported="false",source="mmv"} 0`,
		"twice_total 2000\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("exposition lacks %q:\n%s", want, out)
		}
	}

	p := NewOTelProducer(mapper(t, mapping.NamingDefault), nil, Source{Name: "mmv", Src: ds})
	sm, err := p.Produce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var start time.Time
	for _, m := range sm[0].Metrics {
		if m.Name == "mmv.a.value" {
			start = m.Data.(metricdata.Sum[float64]).DataPoints[0].StartTime
		}
	}
	if want := w.Generation(); !start.Equal(want) {
		t.Errorf("OTLP start time of mmv.a.value through derived metrics %v, want the file's generation %v", start, want)
	}
}

// monitored is a real MMV directory whose status the test sets.
type monitored struct {
	*mmv.Dir
	st source.Status
}

func (m *monitored) Status(time.Time) source.Status { return m.st }

// TestSourceStatus: a source's own status turns source_up to 0 with its
// reason, exports its lag, and logs one line per change, not per scrape.
func TestSourceStatus(t *testing.T) {
	dir := t.TempDir()
	writeValue(t, filepath.Join(dir, "a"), 1000).Close()
	d, err := mmv.OpenDir(dir, mmv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	src := &monitored{Dir: d, st: source.Status{Lag: 1500 * time.Millisecond}}
	var log bytes.Buffer
	c := New(mapper(t, mapping.NamingDefault), slog.New(slog.NewTextHandler(&log, nil)), Source{Name: "m", Src: src})
	for _, step := range []struct {
		st    source.Status
		wants []string
	}{
		{source.Status{Lag: 1500 * time.Millisecond}, []string{`pcp_exporter_source_up{reason="",source="m"} 1`, `pcp_exporter_source_lag_seconds{source="m"} 1.5`}},
		{source.Status{Reason: source.ReasonStalled, Detail: "no growth for 30s", Lag: 40 * time.Second}, []string{`pcp_exporter_source_up{reason="stalled",source="m"} 0`, `pcp_exporter_source_lag_seconds{source="m"} 40`}},
		{source.Status{Reason: source.ReasonStalled, Detail: "no growth for 30s", Lag: 42 * time.Second}, []string{`pcp_exporter_source_up{reason="stalled",source="m"} 0`}},
		{source.Status{Lag: -1}, []string{`pcp_exporter_source_up{reason="",source="m"} 1`}},
	} {
		src.st = step.st
		out := string(exposition(t, c))
		for _, want := range step.wants {
			if !strings.Contains(out, want) {
				t.Errorf("status %+v: exposition lacks %q:\n%s", step.st, want, out)
			}
		}
		if step.st.Lag < 0 && strings.Contains(out, "pcp_exporter_source_lag_seconds") {
			t.Errorf("status %+v: lag exported for a source that does not follow real time", step.st)
		}
	}
	if n := strings.Count(log.String(), "PCP source is down"); n != 1 {
		t.Errorf("%d 'down' lines for one change of state:\n%s", n, log.String())
	}
	if n := strings.Count(log.String(), "PCP source is up"); n != 1 {
		t.Errorf("%d 'up' lines for one change of state:\n%s", n, log.String())
	}
}

// TestServedTimestamp: a followed archive's scrape tells the archive time
// it served (the scrape's time minus the delay, to the microsecond), with
// the lag and the values libpcp interpolates at that time. (The golden
// archive expositions show a replay's: the time its clock maps the scrape
// to.)
func TestServedTimestamp(t *testing.T) {
	f := archive.NewFollow(filepath.Join(corpus, "archives", "marks", "parts", "part_a"), archive.FollowOptions{Delay: 5 * time.Second, Interp: semantics.InterpPrior})
	defer f.Close()
	c := New(mapper(t, mapping.NamingDefault), nil, Source{Name: "f", Src: f})
	// 00:00:20.5 of the archive plus the delay, plus 567 ns
	c.now = func() time.Time { return time.Unix(1704067225, 500000567) }
	out := string(exposition(t, c))
	for _, want := range []string{
		`pcp_exporter_source_served_timestamp_seconds{source="f"} 1.7040672205e+09`,
		`pcp_exporter_source_lag_seconds{source="f"} 5.000000567`,
		"marks_bytes_total 10322", // libpcp: marks.counter at 20.5 s in marks.t1-S0.5.interp.csv
	} {
		if !strings.Contains(out, want) {
			t.Errorf("exposition lacks %q:\n%s", want, out)
		}
	}
}

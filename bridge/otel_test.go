package bridge

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/pcp-exporter/pcp-exporter/mapping"
)

// renderOTel prints metric data deterministically: one line per point;
// times of live sources (now) print as "now".
func renderOTel(sm []metricdata.ScopeMetrics, live bool) string {
	var lines []string
	ts := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		if live && time.Since(t) < time.Minute {
			return "now"
		}
		return t.UTC().Format(time.RFC3339Nano)
	}
	for _, s := range sm {
		for _, m := range s.Metrics {
			head := fmt.Sprintf("%s unit=%q", m.Name, m.Unit)
			var pts []metricdata.DataPoint[float64]
			switch d := m.Data.(type) {
			case metricdata.Sum[float64]:
				head += fmt.Sprintf(" sum monotonic=%v temporality=%s", d.IsMonotonic, d.Temporality)
				pts = d.DataPoints
			case metricdata.Gauge[float64]:
				head += " gauge"
				pts = d.DataPoints
			}
			for _, p := range pts {
				var attrs []string
				for _, kv := range p.Attributes.ToSlice() {
					attrs = append(attrs, fmt.Sprintf("%s=%q", kv.Key, kv.Value.AsString()))
				}
				val := fmt.Sprint(p.Value)
				if strings.Contains(m.Name, "elapsed.running") {
					val = "<volatile>" // an open MMV interval grows with time
				}
				lines = append(lines, fmt.Sprintf("%s {%s} start=%s time=%s value=%s", head, strings.Join(attrs, ","), ts(p.StartTime), ts(p.Time), val))
			}
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}

// renderResource prints a resource's attributes on one line.
func renderResource(r *resource.Resource) string {
	var attrs []string
	for _, kv := range r.Attributes() {
		attrs = append(attrs, fmt.Sprintf("%s=%q", kv.Key, kv.Value.String()))
	}
	return "resource {" + strings.Join(attrs, ",") + "}\n"
}

// TestGoldenOTel checks the Producer's output for the corpus MMV files and
// archive replays against golden files (-update rewrites them).
func TestGoldenOTel(t *testing.T) {
	for name, open := range corpusSources(t) {
		t.Run(name, func(t *testing.T) {
			src := open()
			p := NewOTelProducer(mapper(t, mapping.NamingDefault), nil, src)
			sm, err := p.Produce(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			out := renderResource(Resource(mapper(t, mapping.NamingDefault), src)) + renderOTel(sm, src.When == nil)
			golden(t, name+".otel.txt", []byte(out))
		})
	}
}

// TestOTelCounterStartTimes follows a counter through a replay: the start
// time is the first value's time, kept while the counter grows, and moves
// when it goes down (indoms.reset drops to 50 at the middle sample).
func TestOTelCounterStartTimes(t *testing.T) {
	src := corpusSources(t)["archive-indoms"]()
	at, _ := src.When(time.Time{})
	var when time.Time
	src.When = func(time.Time) (time.Time, bool) { return when, true }
	p := NewOTelProducer(mapper(t, mapping.NamingDefault), nil, src)
	start := at.Add(-40 * time.Second)
	var starts []time.Time
	var values []float64
	for i := 0; i < 15; i++ {
		when = start.Add(time.Duration(i) * 5 * time.Second)
		sm, err := p.Produce(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range sm[0].Metrics {
			if m.Name == "indoms.reset" {
				d := m.Data.(metricdata.Sum[float64])
				starts = append(starts, d.DataPoints[0].StartTime)
				values = append(values, d.DataPoints[0].Value)
			}
		}
	}
	if len(starts) < 10 {
		t.Fatalf("indoms.reset seen %d times", len(starts))
	}
	resets := 0
	for i := 1; i < len(starts); i++ {
		if values[i] < values[i-1] {
			resets++
			if !starts[i].After(starts[i-1]) {
				t.Errorf("value %v < %v but start time stayed %v", values[i], values[i-1], starts[i])
			}
		} else if !starts[i].Equal(starts[i-1]) {
			t.Errorf("start time moved from %v to %v while the counter grew (%v -> %v)", starts[i-1], starts[i], values[i-1], values[i])
		}
	}
	if resets == 0 {
		t.Errorf("no reset seen in %v", values)
	}
}

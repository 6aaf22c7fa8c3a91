package bridge

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source/archive"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

// TestInstanceNamesInForce: serve and OTLP label each value with the name
// its instance has at the fetch's time. buggy_archive (PCP QA) renumbers its
// filesystems at 19:05:48.2; at +110s id 1 is /dev/sda2 with 342460 Kbyte
// and /dev/mapper/ocivolume-oled is id 4 with 1281016 (testdata/pcp-qa,
// TZ=UTC: /usr/bin/python3 ../pcp-corpus/tools/pmfetch_interp.py -a
// buggy_archive -t 1 -S 110 filesys.used); id 1 was ocivolume-oled before.
func TestInstanceNamesInForce(t *testing.T) {
	a, err := pcplog.Open("../testdata/pcp-qa/buggy_archive")
	if err != nil {
		t.Fatal(err)
	}
	rp, err := archive.NewReplay([]*pcplog.Archive{a}, archive.ReplayOptions{Interp: semantics.InterpPrior})
	if err != nil {
		t.Fatal(err)
	}
	defer rp.Close()
	// each output reads first at the start, before the renumbering, then
	// at +110s: a collector keeps a replay's instance names across reads
	// only for the span they hold (source.InstanceNames)
	var at time.Time
	src := Source{Name: "buggy_archive", Src: rp, When: func(time.Time) (time.Time, bool) { return at, true }}

	var b bytes.Buffer
	col := New(mapper(t, mapping.NamingDefault), nil, src)
	at = rp.Start()
	if err := col.WriteText(io.Discard); err != nil {
		t.Fatal(err)
	}
	at = rp.Start().Add(110 * time.Second)
	if err := col.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"/dev/sda2": "3.5067904e+08", "/dev/mapper/ocivolume-oled": "1.311760384e+09"}
	seen := 0
	for _, l := range strings.Split(b.String(), "\n") {
		if !strings.HasPrefix(l, "filesys_used_bytes{") {
			continue
		}
		for name, v := range want {
			if strings.Contains(l, `instname="`+name+`"`) {
				seen++
				if !strings.HasSuffix(l, " "+v) {
					t.Errorf("serve: %s, want %s", l, v)
				}
			}
		}
	}
	if seen != len(want) {
		t.Errorf("serve: %d of the %d series found:\n%s", seen, len(want), b.String())
	}

	p := NewOTelProducer(mapper(t, mapping.NamingDefault), nil, src)
	at = rp.Start()
	if _, err := p.Produce(context.Background()); err != nil {
		t.Fatal(err)
	}
	at = rp.Start().Add(110 * time.Second)
	sm, err := p.Produce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	wantV := map[string]float64{"/dev/sda2": 342460 * 1024, "/dev/mapper/ocivolume-oled": 1281016 * 1024}
	seen = 0
	for _, m := range sm[0].Metrics {
		if m.Name != "filesys.used" {
			continue
		}
		for _, dp := range m.Data.(metricdata.Gauge[float64]).DataPoints {
			name, _ := dp.Attributes.Value("instname")
			if v, ok := wantV[name.AsString()]; ok {
				seen++
				if dp.Value != v {
					t.Errorf("OTLP: %s=%v, want %v", name.AsString(), dp.Value, v)
				}
			}
		}
	}
	if seen != len(wantV) {
		t.Errorf("OTLP: %d of the %d data points found", seen, len(wantV))
	}
}

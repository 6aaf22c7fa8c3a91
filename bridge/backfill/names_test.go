package backfill

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

// TestInstanceNamesInForce: buggy_archive (PCP QA) renumbers its
// filesystems at 19:05:48.2 (id 1 was /dev/mapper/ocivolume-oled and is
// /dev/sda2 after, id 2 /dev/sda2 then /dev/sdb, ...), while each
// filesystem keeps its value. Every sample is labelled with the name its id
// has at the sample's time, so each name keeps its value throughout.
// Expected (testdata/pcp-qa, TZ=UTC): /usr/bin/python3
// ../pcp-corpus/tools/pmfetch_interp.py -a buggy_archive -t 1 -S 110
// filesys.used gives /dev/sda2 342460, /dev/sdb 28, /dev/sda1 5130 (and -S 0
// the same per name, with pmGetInDom after pmSetMode to the start naming the
// ids as before the renumbering).
func TestInstanceNamesInForce(t *testing.T) {
	a, err := pcplog.Open("../../testdata/pcp-qa/buggy_archive")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"/dev/sda2": 342460 * 1024, "/dev/sdb": 28 * 1024, "/dev/sda1": 5130 * 1024}
	for _, step := range []time.Duration{0, time.Second} {
		var mu sync.Mutex
		n := map[string]int{}
		sink := sinkFunc(func(b []Sample) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			for _, s := range b {
				if s.Series.Name() != "filesys_used_bytes" {
					continue
				}
				for _, l := range s.Series.Labels {
					if l.Name != "instname" {
						continue
					}
					n[l.Value]++
					if w, ok := want[l.Value]; ok && s.V != w {
						t.Errorf("step %v: %s=%v at %v, want %v", step, l.Value, s.V, time.UnixMilli(s.T).UTC(), w)
					}
					if l.Value == "/dev/mapper/ocivolume-oled" && s.V < 1<<30 {
						t.Errorf("step %v: %s=%v at %v: another filesystem's value", step, l.Value, s.V, time.UnixMilli(s.T).UTC())
					}
				}
			}
			return 0, nil
		})
		opts := Options{Archives: []*pcplog.Archive{a}, Step: step, Interp: semantics.InterpPrior}
		if _, err := Run(context.Background(), opts, sink); err != nil {
			t.Fatal(err)
		}
		for name := range want {
			if n[name] < 3 {
				t.Errorf("step %v: %d samples of %s", step, n[name], name)
			}
		}
	}
}

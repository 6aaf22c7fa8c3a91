package bridge

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"golang.org/x/sys/unix"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/mmv"
	"github.com/pcp-exporter/pcp-exporter/source/mmv/mmvwrite"
)

// churnAtFetch is a real MMV directory in which something happens to the
// files during chosen Fetch calls, after the collector has read the metrics
// (a writer deleting or creating a file at the worst moment).
type churnAtFetch struct {
	*mmv.Dir
	fetches int
	at      map[int]func()
	every   func() // before every fetch
}

func (c *churnAtFetch) Fetch(t time.Time, pmids []semantics.PMID, res *source.Result) error {
	c.fetches++
	if f := c.at[c.fetches]; f != nil {
		f()
	}
	if c.every != nil {
		c.every()
	}
	return c.Dir.Fetch(t, pmids, res)
}

// writeValue writes an MMV file whose one counter "value" is v (cluster
// assigned by the directory: files in name order get 1, 2, ...).
func writeValue(t *testing.T, path string, v uint64) *mmvwrite.Writer {
	t.Helper()
	w, err := mmvwrite.New(path, mmvwrite.Config{Metrics: []mmvwrite.MetricDef{
		{Name: "value", Item: 1, Type: mmvwrite.TypeU64, Sem: semantics.SemCounter, Units: semantics.Units{DimCount: 1}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	w.MustHandle("value", "").SetUint64(v)
	return w
}

// TestRescanDuringFetch: when a file of a directory vanishes or appears
// and another reader (a second scrape, the OTLP push) lists the directory
// between the read of the metrics and the fetch, the clusters are
// renumbered (files in name order take 1, 2, ...), so the PMIDs the
// collector asked for name other files' metrics. Every value served must
// still be its own file's: the exposition and the OTLP conversion read
// again with the new metric set.
func TestRescanDuringFetch(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(dir string, t *testing.T)
		want   map[string]string // PCP metric -> value
	}{
		{"first file deleted", func(dir string, t *testing.T) { os.Remove(filepath.Join(dir, "a")) },
			map[string]string{"mmv.b.value": "2000", "mmv.c.value": "3000"}},
		{"file created first", func(dir string, t *testing.T) { writeValue(t, filepath.Join(dir, "0"), 500).Close() },
			map[string]string{"mmv.0.value": "500", "mmv.a.value": "1000", "mmv.b.value": "2000", "mmv.c.value": "3000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, out := range []string{"text", "registry", "otel"} {
				t.Run(out, func(t *testing.T) {
					dir := t.TempDir()
					for i, n := range []string{"a", "b", "c"} {
						writeValue(t, filepath.Join(dir, n), uint64(i+1)*1000).Close()
					}
					d, err := mmv.OpenDir(dir, mmv.Options{})
					if err != nil {
						t.Fatal(err)
					}
					defer d.Close()
					src := &churnAtFetch{Dir: d, at: map[int]func(){1: func() {
						// the directory's mtime may not move within a clock
						// tick; the Dir notices by its entries' signature
						tc.change(dir, t)
						d.Metrics() // the other reader
					}}}
					got := map[string]string{}
					switch out {
					case "text", "registry":
						c := New(mapper(t, 0), nil, Source{Name: dir, Src: src})
						var text string
						if out == "text" {
							var b strings.Builder
							if err := c.WriteText(&b); err != nil {
								t.Fatal(err)
							}
							text = b.String()
						} else {
							text = string(exposition(t, c))
						}
						for _, l := range strings.Split(text, "\n") {
							if f := strings.Fields(l); len(f) == 2 && strings.HasPrefix(f[0], "mmv_") {
								got[f[0]] = f[1]
							}
							if strings.HasPrefix(l, "pcp_exporter_source_up") && !strings.HasSuffix(l, " 1") {
								t.Errorf("source down: %s", l)
							}
						}
					case "otel":
						p := NewOTelProducer(mapper(t, 0), nil, Source{Name: dir, Src: src})
						sm, err := p.Produce(context.Background())
						if err != nil {
							t.Fatal(err)
						}
						for _, m := range sm[0].Metrics {
							for _, dp := range m.Data.(metricdata.Sum[float64]).DataPoints {
								got[m.Name] = strconv.FormatFloat(dp.Value, 'g', -1, 64)
							}
						}
					}
					if src.fetches < 2 {
						t.Errorf("%d fetches: the change during the fetch was not noticed", src.fetches)
					}
					want := tc.want
					if out != "otel" { // Prometheus names
						want = map[string]string{}
						for k, v := range tc.want {
							want[strings.ReplaceAll(k, ".", "_")+`_total`] = v
						}
					}
					if len(got) != len(want) {
						t.Errorf("got %v, want %v", got, want)
					}
					for k, v := range want {
						if got[k] != v {
							t.Errorf("%s = %q, want %s (all: %v)", k, got[k], v, got)
						}
					}
				})
			}
		})
	}
}

// TestFIFOSwapEveryScrape: a file of an MMV directory swapped with a FIFO
// in a loop (rename over its name, as a hostile writer sharing the
// directory can) is skipped while it is a FIFO, and the directory's other
// files are in every scrape, under whatever cluster numbers the swap gives
// them (the swapped file sorts first, so every swap renumbers them). The
// collector used to see a new metric set at every read and report the
// whole directory failed ("metrics kept changing") in a quarter of them.
func TestFIFOSwapEveryScrape(t *testing.T) {
	dir := t.TempDir()
	writeValue(t, filepath.Join(dir, "a"), 1000).Close()
	writeValue(t, filepath.Join(dir, "c"), 3000).Close()
	// the swap renames a new FIFO and a new copy of an MMV file (a new
	// inode each time, as a writer re-creating it) over the name
	spare := filepath.Join(t.TempDir(), "0")
	writeValue(t, spare, 500).Close()
	good, err := os.ReadFile(spare)
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, "0")
	if err := os.WriteFile(name, good, 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := mmv.OpenDir(dir, mmv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()

	stop, done := make(chan struct{}), make(chan struct{})
	var swaps int
	go func() {
		defer close(done)
		tmp := filepath.Join(dir, ".swap")
		for {
			select {
			case <-stop:
				return
			default:
			}
			if unix.Mkfifo(tmp, 0o600) != nil || os.Rename(tmp, name) != nil ||
				os.WriteFile(tmp, good, 0o644) != nil || os.Rename(tmp, name) != nil {
				t.Error("swap failed")
				return
			}
			swaps++
		}
	}()
	stopSwaps := sync.OnceFunc(func() { close(stop); <-done })
	t.Cleanup(stopSwaps)
	// and at the worst moment: between the collector's read of the
	// metrics and its fetch, every time
	fifoNext := true
	src := &churnAtFetch{Dir: d, every: func() {
		tmp := filepath.Join(dir, ".swapped")
		if fifoNext {
			err = unix.Mkfifo(tmp, 0o600)
		} else {
			err = os.WriteFile(tmp, good, 0o644)
		}
		if err == nil {
			err = os.Rename(tmp, name)
		}
		if err != nil {
			t.Fatal(err)
		}
		fifoNext = !fifoNext
	}}
	c := New(mapper(t, 0), nil, Source{Name: dir, Src: src})
	p := NewOTelProducer(mapper(t, 0), nil, Source{Name: dir, Src: src})
	scrapes, missing := 0, 0
	for end := time.Now().Add(time.Second); time.Now().Before(end) || scrapes < 50; scrapes++ {
		text := string(exposition(t, c)) // the registry's, as /metrics serves
		for _, want := range []string{"\nmmv_a_value_total 1000\n", "\nmmv_c_value_total 3000\n", `pcp_exporter_source_up{reason="",source="` + dir + `"} 1`} {
			if !strings.Contains(text, want) {
				missing++
				if missing <= 3 {
					t.Errorf("scrape %d lacks %q:\n%s", scrapes, strings.TrimSpace(want), text)
				}
			}
		}
		sm, err := p.Produce(context.Background())
		if err != nil {
			missing++
			if missing <= 3 {
				t.Errorf("OTLP read %d: %v", scrapes, err)
			}
			continue
		}
		got := map[string]float64{}
		for _, m := range sm[0].Metrics {
			for _, dp := range m.Data.(metricdata.Sum[float64]).DataPoints {
				got[m.Name] = dp.Value
			}
		}
		if got["mmv.a.value"] != 1000 || got["mmv.c.value"] != 3000 {
			missing++
			if missing <= 3 {
				t.Errorf("OTLP read %d: %v", scrapes, got)
			}
		}
	}
	stopSwaps()
	t.Logf("%d scrapes during %d swaps (and one before each fetch), %d lacking a file's metrics", scrapes, swaps, missing)
	if swaps < 20 {
		t.Fatalf("%d scrapes during %d swaps: too few to race", scrapes, swaps)
	}
}

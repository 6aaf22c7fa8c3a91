package backfill

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

// BenchmarkBackfillW2 backfills workload W2 (bench/lib.sh; $W2_DIR, default
// /tmp/pcpx-bench/w2) at a 1 s step into a sink that drops the samples:
// the cost of reading, interpolating and mapping.
func BenchmarkBackfillW2(b *testing.B) {
	dir := os.Getenv("W2_DIR")
	if dir == "" {
		dir = "/tmp/pcpx-bench/w2"
	}
	path := filepath.Join(dir, "w2v2")
	if _, err := os.Stat(path + ".meta"); err != nil {
		b.Skipf("W2 not recorded at %s (bench/decode/record-w2.sh)", dir)
	}
	for _, step := range []time.Duration{time.Second, 0} {
		name := "step1s"
		if step == 0 {
			name = "raw"
		}
		b.Run(name, func(b *testing.B) {
			var n int64
			for i := 0; i < b.N; i++ {
				a, err := pcplog.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				st, err := Run(context.Background(), Options{Archives: []*pcplog.Archive{a}, Step: step}, sinkFunc(func(s []Sample) (int, error) { return 0, nil }))
				if err != nil {
					b.Fatal(err)
				}
				n = st.Written
				a.Close()
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}

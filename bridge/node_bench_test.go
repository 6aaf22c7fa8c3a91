package bridge

import (
	"io"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/source/pmcd"
)

// BenchmarkPMCDScrapeNodeNaming scrapes the local pmcd (every metric but
// the per-process, cgroup and MMV ones) through the text fast path with the
// default naming and with the node naming, in turns in one run (the PMDAs'
// time included, as in a scrape): default-ns/op and node-ns/op are the
// means, node/default their ratio (the node profile's cost: its families
// computed from one fetch of their sources, the other metrics as default).
func BenchmarkPMCDScrapeNodeNaming(b *testing.B) {
	e2e.Require(b, "pminfo")
	s, err := pmcd.Open("local:", pmcd.Options{Selection: pmcd.Selection{Exclude: []string{"proc", "hotproc", "acct", "mmv", "cgroup"}}, Timeout: 30 * time.Second, MetadataTimeout: 3 * time.Minute})
	if err != nil {
		if e2e.Mandatory() {
			b.Fatal(err)
		}
		b.Skip(err)
	}
	defer s.Close()
	col := func(n mapping.Naming) *Collector {
		m, err := mapping.New(nil, mapping.Options{Naming: &n})
		if err != nil {
			b.Fatal(err)
		}
		return New(m, nil, Source{Name: "pmcd", Src: s})
	}
	def, node := col(mapping.NamingDefault), col(mapping.NamingNode)
	for _, c := range []*Collector{def, node} { // warm: mapping, label caches
		if err := c.WriteText(io.Discard); err != nil {
			b.Fatal(err)
		}
	}
	var td, tn time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		first, second, t1, t2 := def, node, &td, &tn
		if i%2 == 1 {
			first, second, t1, t2 = node, def, &tn, &td
		}
		start := time.Now()
		if err := first.WriteText(io.Discard); err != nil {
			b.Fatal(err)
		}
		mid := time.Now()
		if err := second.WriteText(io.Discard); err != nil {
			b.Fatal(err)
		}
		*t1 += mid.Sub(start)
		*t2 += time.Since(mid)
	}
	b.ReportMetric(float64(td.Nanoseconds())/float64(b.N), "default-ns/op")
	b.ReportMetric(float64(tn.Nanoseconds())/float64(b.N), "node-ns/op")
	b.ReportMetric(float64(tn)/float64(td), "node/default")
}

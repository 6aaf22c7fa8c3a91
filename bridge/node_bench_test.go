package bridge

import (
	"io"
	"syscall"
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
// computed from one fetch of their sources, the other metrics as default);
// the -cpu figures are this process's CPU time alone (the exporter's own
// work, without pmcd's and the agents').
func BenchmarkPMCDScrapeNodeNaming(b *testing.B) { benchProfileScrape(b, mapping.NamingNode) }

// BenchmarkPMCDScrapeHostmetricsNaming is BenchmarkPMCDScrapeNodeNaming
// with the hostmetrics naming (hostmetrics-ns/op, hostmetrics/default).
func BenchmarkPMCDScrapeHostmetricsNaming(b *testing.B) {
	benchProfileScrape(b, mapping.NamingHostmetrics)
}

// benchProfileScrape scrapes the local pmcd with the default naming and
// with naming p in turns.
func benchProfileScrape(b *testing.B, p mapping.Naming) {
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
	def, node := col(mapping.NamingDefault), col(p)
	for _, c := range []*Collector{def, node} { // warm: mapping, label caches
		if err := c.WriteText(io.Discard); err != nil {
			b.Fatal(err)
		}
	}
	var td, tn, cd, cn time.Duration // wall, and this process's CPU (the exporter's own work)
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		first, second, t1, t2, c1, c2 := def, node, &td, &tn, &cd, &cn
		if i%2 == 1 {
			first, second, t1, t2, c1, c2 = node, def, &tn, &td, &cn, &cd
		}
		start, cstart := time.Now(), cpu()
		if err := first.WriteText(io.Discard); err != nil {
			b.Fatal(err)
		}
		mid, cmid := time.Now(), cpu()
		if err := second.WriteText(io.Discard); err != nil {
			b.Fatal(err)
		}
		*t1 += mid.Sub(start)
		*t2 += time.Since(mid)
		*c1 += cmid - cstart
		*c2 += cpu() - cmid
	}
	b.ReportMetric(float64(cd.Nanoseconds())/float64(b.N), "default-cpu-ns/op")
	b.ReportMetric(float64(cn.Nanoseconds())/float64(b.N), p.String()+"-cpu-ns/op")
	b.ReportMetric(float64(cn)/float64(cd), p.String()+"/default-cpu")
	b.ReportMetric(float64(td.Nanoseconds())/float64(b.N), "default-ns/op")
	b.ReportMetric(float64(tn.Nanoseconds())/float64(b.N), p.String()+"-ns/op")
	b.ReportMetric(float64(tn)/float64(td), p.String()+"/default")
}

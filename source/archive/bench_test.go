package archive

import (
	"runtime/debug"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/archive/internal/archivetest"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

// BenchmarkReplay replays an archive at a 1 s step from start to end, as
// `replay --interp prior` does, and reports the values produced per second:
// "m4" over the metrics of the comparison with pmrep
// (bench/replay/metrics.txt, performance anchor M4; every metric when the
// archive has none of them), "all" over every metric (what backfill --step
// replays).
func BenchmarkReplay(b *testing.B) {
	a, err := pcplog.Open(archivetest.BenchArchive())
	if err != nil {
		b.Fatal(err)
	}
	m4, all := archivetest.M4Metrics(b, a.Metrics())
	for _, bc := range []struct {
		name  string
		pmids []semantics.PMID
	}{{"m4", m4}, {"all", all}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var vals int
			for b.Loop() {
				vals = replayAll(b, a, bc.pmids)
			}
			b.ReportMetric(float64(vals)*float64(b.N)/b.Elapsed().Seconds(), "values/s")
		})
	}
}

// BenchmarkReplayCLI is BenchmarkReplay/m4 as `replay --interp prior` of
// the 59 metrics runs it (bench/replay/run.sh): the archive opened for each
// replay and the collector tuned as the command tunes it (GOGC=400 within
// 48 MiB).
func BenchmarkReplayCLI(b *testing.B) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(48 << 20))
	b.ReportAllocs()
	var vals int
	for b.Loop() {
		a, err := pcplog.Open(archivetest.BenchArchive())
		if err != nil {
			b.Fatal(err)
		}
		m4, _ := archivetest.M4Metrics(b, a.Metrics())
		vals = replayAll(b, a, m4)
	}
	b.ReportMetric(float64(vals)*float64(b.N)/b.Elapsed().Seconds(), "values/s")
}

func replayAll(b *testing.B, a *pcplog.Archive, pmids []semantics.PMID) int {
	rp, err := NewReplay([]*pcplog.Archive{a}, ReplayOptions{Interp: semantics.InterpPrior})
	if err != nil {
		b.Fatal(err)
	}
	defer rp.Close()
	end, err := rp.End()
	if err != nil {
		b.Fatal(err)
	}
	var res source.Result
	vals := 0
	for t := rp.Start(); !t.After(end); t = t.Add(time.Second) {
		if err := rp.Fetch(t, pmids, &res); err != nil {
			b.Fatal(err)
		}
		for i := range res.Sets {
			vals += len(res.Sets[i].Values)
		}
	}
	return vals
}

package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
	"github.com/pcp-exporter/pcp-exporter/internal/longtest"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source/mmv/mmvwrite"
)

// TestTargetInfoJoins runs the README's joins (Joining target_info) in
// the real Prometheus, one scrape job per mode: a PCP host (serve with no
// flags: the local pmcd and an MMV directory holding an application's
// file), an MMV-only sidecar (--mmv.dir), a pmlogger farm's history (the
// corpus archives of two hosts backfilled as one job) and the host's
// history backfilled under the live job's job and instance. Every join must
// answer the expected series with no error, and target_info must be one
// series per target: per (job, instance), per (job, instance, hostname)
// for the farm.
func TestTargetInfoJoins(t *testing.T) {
	longtest.Skip(t, "waits for the system pmcd's metadata (a minute and more on a busy host)")
	if raceEnabled {
		t.Skip("an end-to-end run: not under the race detector")
	}
	t.Parallel() // waits on peers, not the CPU: beside the other end-to-end runs
	e2e.Require(t, "prometheus", "pminfo")
	e2e.RequirePMCD(t) // pmlogger and the exporters read the system pmcd
	dir := t.TempDir()
	tmp := filepath.Join(dir, "pcptmp")
	mmvDir := filepath.Join(tmp, "mmv")
	if err := os.MkdirAll(mmvDir, 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := mmvwrite.New(filepath.Join(mmvDir, "app"), mmvwrite.Config{Metrics: []mmvwrite.MetricDef{
		{Name: "requests", Item: 1, Type: mmvwrite.TypeU64, Sem: semantics.SemCounter, Units: semantics.Units{DimCount: 1}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	w.MustHandle("requests", "").SetUint64(7)
	defer w.Close()

	host, sidecar := e2e.FreeAddr(t), e2e.FreeAddr(t)
	// serve with no flags: $PCP_TMP_DIR/mmv
	startExporterEnv(t, []string{"PCP_TMP_DIR=" + tmp}, http.DefaultClient, "http://"+host, "serve", "--web.listen-address="+host)
	startExporter(t, http.DefaultClient, "http://"+sidecar, "serve", "--web.listen-address="+sidecar, "--mmv.dir="+mmvDir)

	live := filepath.Join(corpus, "archives", "live", "live")
	indoms := filepath.Join(corpus, "archives", "indoms", "indoms")
	data := filepath.Join(dir, "data")
	backfillCLI(t, "--output=tsdb:"+data, "--label=job=host", "--label=instance="+host, live)
	backfillCLI(t, "--output=tsdb:"+data, "--label=job=farm", "--label=instance=farm:9464", live, indoms)

	for deadline := time.Now().Add(4 * time.Minute); ; {
		resp, err := http.Get("http://" + host + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 0, 1<<20)
		buf := make([]byte, 64<<10)
		for {
			n, err := resp.Body.Read(buf)
			b = append(b, buf[:n]...)
			if err != nil {
				break
			}
		}
		resp.Body.Close()
		if strings.Contains(string(b), `pcp_exporter_source_up{reason="",source="pmcd`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the pmcd source is not up after 4 minutes")
		}
		time.Sleep(2 * time.Second)
	}
	prom := e2e.StartPrometheus(t, fmt.Sprintf(`global:
  scrape_interval: 2s
scrape_configs:
  - job_name: host
    static_configs: [{targets: [%q]}]
  - job_name: sidecar
    static_configs: [{targets: [%q]}]
`, host, sidecar), data)
	waitScrapes(t, prom, "host", 3)
	waitScrapes(t, prom, "sidecar", 3)
	now := time.Now()
	liveT, _ := time.Parse(time.RFC3339, "2026-11-22T08:59:00Z")
	indomsT, _ := time.Parse(time.RFC3339, "2024-01-01T00:00:30Z")

	for _, c := range []struct {
		name  string
		at    time.Time
		query string
		want  int
	}{
		{"host: README join", now, `kernel_all_load{job="host"} * on (job, instance) group_left(hostname) target_info`, 3},
		{"host: an MMV application's series", now, `mmv_app_requests_total{job="host"} * on (job, instance) group_left(hostname, machineid) target_info`, 1},
		{"host: one target_info", now, `count by (job, instance) (target_info{job="host"}) == 1`, 1},
		{"host history: README join", liveT, `kernel_all_load{job="host"} * on (job, instance) group_left(hostname) target_info`, 3},
		{"host history: one target_info", liveT, `count by (job, instance) (target_info{job="host"}) == 1`, 1},
		{"sidecar: join", now, `mmv_app_requests_total{job="sidecar"} * on (job, instance) group_left(hostname) target_info`, 1},
		{"sidecar: one target_info", now, `count by (job, instance) (target_info{job="sidecar"}) == 1`, 1},
		{"farm: host vm", liveT, `kernel_all_load{job="farm"} * on (job, instance, hostname) group_left(machineid) target_info`, 3},
		{"farm: host corpus-host", indomsT, `count(indoms_count_total{job="farm"} * on (job, instance, hostname) group_left() target_info{hostname="corpus-host"}) > 0`, 1},
		{"farm: one target_info per host (vm)", liveT, `count by (job, instance, hostname) (target_info{job="farm"}) == 1`, 1},
		{"farm: one target_info per host (corpus-host)", indomsT, `count by (job, instance, hostname) (target_info{job="farm"}) == 1`, 1},
	} {
		got := e2e.PromQuery(t, prom, c.query, c.at) // fails the test on a query error
		if len(got) != c.want {
			t.Errorf("%s: %s at %s: %d series, want %d: %v", c.name, c.query, c.at.UTC().Format(time.RFC3339), len(got), c.want, got)
		}
	}
}

package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
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
// file), an MMV-only sidecar (--mmv.dir), several live pmcds of different
// hosts in one exporter (the system pmcd and a private pmcd in a UTS
// namespace of its own, hostname otherhost), a pmlogger farm's history
// (the corpus archives of two hosts backfilled as one job) and the host's
// history backfilled under the live job's job and instance. Every join must
// answer the expected series with no error, and target_info must be one
// series per target: per (job, instance), per (job, instance, hostname)
// for several pmcds and the farm.
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

	// another host's pmcd (its linux agent, so its kernel.all.load)
	other := e2e.StartPMCD(t, e2e.PMCDConfig{Hostname: "otherhost", Agents: "pmcd\t2\tdso\tpmcd_init\t/var/lib/pcp/pmdas/pmcd/pmda_pmcd.so\n" +
		"linux\t60\tdso\tlinux_init\t/var/lib/pcp/pmdas/linux/pmda_linux.so\n"})

	host, sidecar, pmcds := e2e.FreeAddr(t), e2e.FreeAddr(t), e2e.FreeAddr(t)
	// serve with no flags: $PCP_TMP_DIR/mmv
	startExporterEnv(t, []string{"PCP_TMP_DIR=" + tmp}, http.DefaultClient, "http://"+host, "serve", "--web.listen-address="+host)
	startExporter(t, http.DefaultClient, "http://"+sidecar, "serve", "--web.listen-address="+sidecar, "--mmv.dir="+mmvDir)
	startExporter(t, http.DefaultClient, "http://"+pmcds, "serve", "--web.listen-address="+pmcds, "--pmcd=local:", "--pmcd="+other.Addr)

	live := filepath.Join(corpus, "archives", "live", "live")
	indoms := filepath.Join(corpus, "archives", "indoms", "indoms")
	data := filepath.Join(dir, "data")
	backfillCLI(t, "--output=tsdb:"+data, "--label=job=host", "--label=instance="+host, live)
	backfillCLI(t, "--output=tsdb:"+data, "--label=job=farm", "--label=instance=farm:9464", live, indoms)

	waitSourcesUp(t, host, "pmcd unix:")
	waitSourcesUp(t, pmcds, "pmcd unix:", "pmcd "+other.Addr)
	prom := e2e.StartPrometheus(t, fmt.Sprintf(`global:
  scrape_interval: 2s
scrape_configs:
  - job_name: host
    static_configs: [{targets: [%q]}]
  - job_name: sidecar
    static_configs: [{targets: [%q]}]
  - job_name: pmcds
    static_configs: [{targets: [%q]}]
`, host, sidecar, pmcds), data)
	waitScrapes(t, prom, "host", 3)
	waitScrapes(t, prom, "sidecar", 3)
	waitScrapes(t, prom, "pmcds", 3)
	hostname, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	liveT, _ := time.Parse(time.RFC3339, "2026-11-22T08:59:00Z")
	indomsT, _ := time.Parse(time.RFC3339, "2024-01-01T00:00:30Z")

	for _, c := range []struct {
		name  string
		at    time.Time
		query string
		want  int
	}{
		{"host: README join", now, `kernel_all_load{job="host"} * on (job, instance) group_left(hostname) target_info{job="host"}`, 3},
		{"host: an MMV application's series", now, `mmv_app_requests_total{job="host"} * on (job, instance) group_left(hostname, machineid) target_info{job="host"}`, 1},
		{"host: one target_info", now, `count by (job, instance) (target_info{job="host"}) == 1`, 1},
		{"host history: README join", liveT, `kernel_all_load{job="host"} * on (job, instance) group_left(hostname) target_info{job="host"}`, 3},
		{"host history: one target_info", liveT, `count by (job, instance) (target_info{job="host"}) == 1`, 1},
		{"sidecar: join", now, `mmv_app_requests_total{job="sidecar"} * on (job, instance) group_left(hostname) target_info{job="sidecar"}`, 1},
		{"sidecar: one target_info", now, `count by (job, instance) (target_info{job="sidecar"}) == 1`, 1},
		{"several pmcds: README join", now, `kernel_all_load{job="pmcds"} * on (job, instance, hostname) group_left(machineid) target_info{job="pmcds"}`, 6},
		{"several pmcds: this host", now, `count(kernel_all_load{job="pmcds",hostname="` + hostname + `"} * on (job, instance, hostname) group_left(machineid) target_info) == 3`, 1},
		{"several pmcds: otherhost", now, `count(kernel_all_load{job="pmcds",hostname="otherhost"} * on (job, instance, hostname) group_left(machineid) target_info) == 3`, 1},
		{"several pmcds: one target_info per host", now, `count by (job, instance, hostname) (target_info{job="pmcds"}) == 1`, 2},
		{"farm: host vm", liveT, `kernel_all_load{job="farm"} * on (job, instance, hostname) group_left(machineid) target_info{job="farm"}`, 3},
		{"farm: host corpus-host", indomsT, `count(indoms_count_total{job="farm"} * on (job, instance, hostname) group_left() target_info{hostname="corpus-host"}) > 0`, 1},
		{"farm: one target_info per host (vm)", liveT, `count by (job, instance, hostname) (target_info{job="farm"}) == 1`, 1},
		{"farm: one target_info per host (corpus-host)", indomsT, `count by (job, instance, hostname) (target_info{job="farm"}) == 1`, 1},
	} {
		got := e2e.PromQuery(t, prom, c.query, c.at) // fails the test on a query error
		if len(got) != c.want {
			t.Errorf("%s: %s at %s: %d series, want %d: %v", c.name, c.query, c.at.UTC().Format(time.RFC3339), len(got), c.want, got)
		}
	}
	// what the README warns of: the one-host join over every job's
	// target_info meets the several-pmcds target's two
	q := `kernel_all_load{job="host"} * on (job, instance) group_left(hostname) target_info`
	resp, err := http.Get(prom + "/api/v1/query?" + url.Values{"query": {q}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "many-to-many matching not allowed") {
		t.Errorf("%s: %s; want the many-to-many error the README warns of", q, b)
	}
}

// waitSourcesUp waits up to 4 minutes (the system pmcd's metadata on a
// busy host) until the exporter at addr says each source named with one
// of prefixes is up.
func waitSourcesUp(t *testing.T, addr string, prefixes ...string) {
	t.Helper()
	for deadline := time.Now().Add(4 * time.Minute); ; {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		up := 0
		for _, p := range prefixes {
			if strings.Contains(string(b), `pcp_exporter_source_up{reason="",source="`+p) {
				up++
			}
		}
		if up == len(prefixes) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sources %q of %s are not all up after 4 minutes", prefixes, addr)
		}
		time.Sleep(2 * time.Second)
	}
}

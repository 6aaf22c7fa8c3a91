package mixin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
	"github.com/pcp-exporter/pcp-exporter/internal/longtest"
)

// activeAlert is one alert of Prometheus's /api/v1/alerts.
type activeAlert struct {
	Labels map[string]string
	State  string
}

// waitAlert waits until the alert with these labels is firing (firing
// true) or gone (false), for 90 s at most.
func waitAlert(t *testing.T, prom string, firing bool, match map[string]string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		var data struct{ Alerts []activeAlert }
		e2e.PromAPI(t, prom+"/api/v1/alerts", &data)
		state := ""
		for _, a := range data.Alerts {
			ok := true
			for k, v := range match {
				ok = ok && a.Labels[k] == v
			}
			if ok {
				state = a.State
			}
		}
		if (firing && state == "firing") || (!firing && state == "") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("alert %v: state %q after 90 s, want firing=%v; active alerts: %+v", match, state, firing, data.Alerts)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// pmcdPath finds pmcd (PATH, $PCP_EXPORTER_PMCD, or PCP's binadm directory).
func pmcdPath(t *testing.T) string {
	if p, err := e2e.Lookup("pmcd"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/lib/pcp/bin/pmcd"); err == nil {
		return "/usr/lib/pcp/bin/pmcd"
	}
	return e2e.Require(t, "pmcd")[0]
}

// TestHealthAlertsFire loads the health alerts (rendered with a "for" of 1 s)
// into a real Prometheus scraping the exporter and makes each alert fire by
// causing its condition, then resolve by undoing it: a pmcd that is not
// there (then started), the MMV directory removed (then back), the followed
// pmlogger stopped (SIGSTOP, then SIGCONT), a broken mapping file reloaded
// with SIGHUP (then fixed and reloaded), a backfill whose samples the
// receiver (this Prometheus, remote write) rejects as out of bounds, its
// --metrics.textfile read by node_exporter's textfile collector (then a
// backfill into TSDB blocks that writes every sample).
func TestHealthAlertsFire(t *testing.T) {
	longtest.Skip(t, "a minute of Prometheus evaluating the health alerts")
	if raceEnabled {
		t.Skip("end-to-end processes only: runs without the race detector")
	}
	bins := e2e.Require(t, "prometheus", "pmlogger", "jsonnet", "make", "pminfo", "prometheus-node-exporter")
	pmcd := pmcdPath(t)
	e2e.LockPMCD(t, false) // pmlogger records from the system pmcd
	dir := t.TempDir()

	rules := filepath.Join(dir, "rules")
	if out, err := exec.Command(bins[3], "-s", "JSONNET="+bins[2], "OUT="+rules, `CONFIG={healthFor: "1s"}`).CombinedOutput(); err != nil {
		t.Fatalf("make: %v\n%s", err, out)
	}
	mmvDir := filepath.Join(dir, "mmv")
	if err := os.Mkdir(mmvDir, 0o755); err != nil {
		t.Fatal(err)
	}
	mapFile := filepath.Join(dir, "mapping.yaml")
	if err := os.WriteFile(mapFile, []byte("exclude: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pl := startPmlogger(t, bins[1], dir)
	// one exporter with three sources: a pmcd not there yet and the MMV
	// directory; another following the pmlogger archive (serve exports
	// archives instead of MMV files)
	exp := startExporter(t, healthExporterAddr, "--pmcd=127.0.0.1:"+privatePMCDPort, "--mmv.dir="+mmvDir, "--mapping.config="+mapFile)
	startExporter(t, dashArchiveAddr, "--archive="+filepath.Join(dir, "arch"))
	// node_exporter with only its textfile collector, reading the
	// backfill's metrics file
	textDir := filepath.Join(dir, "textfile")
	if err := os.Mkdir(textDir, 0o755); err != nil {
		t.Fatal(err)
	}
	nodeAddr := e2e.FreeAddr(t)
	ne := exec.Command(bins[5], "--web.listen-address="+nodeAddr, "--collector.disable-defaults", "--collector.textfile", "--collector.textfile.directory="+textDir)
	if err := ne.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ne.Process.Kill(); ne.Wait() })
	config := promConfig(filepath.Join(rules, "alerts.yaml"), healthExporterAddr, dashArchiveAddr) +
		fmt.Sprintf("  - job_name: node\n    static_configs:\n      - targets: [%q]\n", nodeAddr)
	prom := e2e.StartPrometheus(t, config, "", "--web.enable-remote-write-receiver")
	pmcdSource := "pmcd 127.0.0.1:" + privatePMCDPort
	tt := t

	t.Run("pmcd down", func(t *testing.T) {
		waitAlert(t, prom, true, map[string]string{"alertname": "PCPExporterSourceDown", "source": pmcdSource, "reason": "down"})
		// a private pmcd (its own port, socket and run directory) with pmcd's own agent
		pd := t.TempDir()
		conf := filepath.Join(pd, "pmcd.conf")
		if err := os.WriteFile(conf, []byte("pmcd\t2\tdso\tpmcd_init\t/var/lib/pcp/pmdas/pmcd/pmda_pmcd.so\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(pmcd, "-f", "-i", "127.0.0.1", "-p", privatePMCDPort, "-s", filepath.Join(pd, "pmcd.sock"), "-c", conf, "-l", filepath.Join(pd, "pmcd.log"), "-U", "root")
		cmd.Env = append(os.Environ(), "PCP_RUN_DIR="+pd)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// it runs until the whole test ends: the last check wants no alert
		tt.Cleanup(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
		})
		waitAlert(t, prom, false, map[string]string{"alertname": "PCPExporterSourceDown", "source": pmcdSource})
	})

	t.Run("MMV directory missing", func(t *testing.T) {
		moved := mmvDir + ".moved"
		if err := os.Rename(mmvDir, moved); err != nil {
			t.Fatal(err)
		}
		waitAlert(t, prom, true, map[string]string{"alertname": "PCPExporterSourceDown", "source": mmvDir, "reason": "missing"})
		if err := os.Rename(moved, mmvDir); err != nil {
			t.Fatal(err)
		}
		waitAlert(t, prom, false, map[string]string{"alertname": "PCPExporterSourceDown", "source": mmvDir})
	})

	t.Run("pmlogger stopped", func(t *testing.T) {
		if err := pl.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		waitAlert(t, prom, true, map[string]string{"alertname": "PCPExporterSourceStalled", "reason": "stalled"})
		if err := pl.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		waitAlert(t, prom, false, map[string]string{"alertname": "PCPExporterSourceStalled"})
	})

	t.Run("reload failed", func(t *testing.T) {
		reload := func(content string) {
			if err := os.WriteFile(mapFile, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := exp.Process.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
		}
		reload("exclude: [\n") // not YAML
		waitAlert(t, prom, true, map[string]string{"alertname": "PCPExporterReloadFailed", "instance": healthExporterAddr})
		reload("exclude: []\n")
		waitAlert(t, prom, false, map[string]string{"alertname": "PCPExporterReloadFailed"})
	})

	t.Run("backfill rejected", func(t *testing.T) {
		textfile := filepath.Join(textDir, "pcp-history.prom")
		archive := filepath.Join("..", "testdata", "pcp-corpus", "archives", "live", "live")
		backfill := func(wantOK bool, output string) {
			out, err := exec.Command(exporterBinary(t), "backfill", "--quiet", "--output="+output, "--metrics.textfile="+textfile, "--label=job=pcp-history", archive).CombinedOutput()
			if (err == nil) != wantOK {
				t.Fatalf("backfill --output=%s: %v, want success %v\n%s", output, err, wantOK, out)
			}
		}
		// days-old samples: Prometheus's head, scraping now, refuses them
		backfill(false, "remote-write:"+prom+"/api/v1/write")
		waitAlert(t, prom, true, map[string]string{"alertname": "PCPExporterBackfillRejections", "backfill": "pcp-history"})
		reasons := e2e.PromQuery(t, prom, `pcp_exporter_backfill_last_run_rejected_samples{job="node",backfill="pcp-history"}`, time.Time{})
		if len(reasons) != 1 || reasons[0].Metric["reason"] != "out of bounds" {
			t.Errorf("rejection reasons %+v, want out of bounds", reasons)
		}
		backfill(true, "tsdb:"+t.TempDir())
		waitAlert(t, prom, false, map[string]string{"alertname": "PCPExporterBackfillRejections"})
	})

	// nothing else is active: no read errors, no other alert on the way
	var data struct{ Alerts []activeAlert }
	e2e.PromAPI(t, prom+"/api/v1/alerts", &data)
	for _, a := range data.Alerts {
		t.Errorf("alert still active: %v %s", a.Labels, a.State)
	}
}

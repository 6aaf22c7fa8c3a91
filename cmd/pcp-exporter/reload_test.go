package main

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
)

// TestReload changes serve's mapping and derived metrics files under it and
// reloads them with SIGHUP and with POST /-/reload: a good file takes
// effect, a bad one keeps the configuration in use, answers 500 with the
// reason, logs it and sets pcp_exporter_config_last_reload_successful to 0.
func TestReload(t *testing.T) {
	dir := t.TempDir()
	mappingFile := filepath.Join(dir, "mapping.yml")
	derivedFile := filepath.Join(dir, "derived.conf")
	write := func(path, text string) {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(mappingFile, "include: [\"seed.counter\"]\n")
	write(derivedFile, "my.twice = 2 * seed.instant\n")
	addr := e2e.FreeAddr(t)
	base := "http://" + addr
	client := &http.Client{Timeout: 10 * time.Second}
	log := &lockedBuffer{}
	cmd := startExporterTo(t, log, client, base, "serve", "--web.listen-address="+addr,
		"--archive="+filepath.Join(corpus, "archives", "seedtables", "seedtables"), "--replay.loop",
		"--mapping.config="+mappingFile, "--derived.config="+derivedFile)
	scrape := func() string {
		resp, err := client.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	// waitFor scrapes until every want is there and no unwanted is.
	waitFor := func(step string, want, unwanted []string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			body := scrape()
			ok := true
			for _, w := range want {
				ok = ok && strings.Contains(body, w)
			}
			for _, u := range unwanted {
				ok = ok && !strings.Contains(body, u)
			}
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: want %q, not %q, in:\n%s\nlog:\n%s", step, want, unwanted, body, log)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	post := func() (int, string) {
		resp, err := client.Post(base+"/-/reload", "text/plain", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const good, bad = "pcp_exporter_config_last_reload_successful 1", "pcp_exporter_config_last_reload_successful 0"
	waitFor("start", []string{"# TYPE seed_total counter", good}, []string{"# TYPE seed_instant", "my_twice"})

	// SIGHUP, good files: another selection and another derived metric
	write(mappingFile, "include: [\"seed.instant\", \"my.*\"]\n")
	write(derivedFile, "my.thrice = 3 * seed.instant\n")
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor("SIGHUP good", []string{"# TYPE seed_instant gauge", "# TYPE my_thrice gauge", good}, []string{"# TYPE seed_total", "my_twice"})

	// SIGHUP, bad mapping file: the configuration stays
	write(mappingFile, "include: [\"seed.counter\"]\nbogus: 1\n")
	cmd.Process.Signal(syscall.SIGHUP)
	waitFor("SIGHUP bad", []string{"# TYPE seed_instant gauge", "# TYPE my_thrice gauge", bad}, []string{"# TYPE seed_total"})
	// the log line reaches us through a pipe, maybe after the scrape
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if l := log.String(); strings.Contains(l, "configuration reload failed") && strings.Contains(l, "field bogus not found") {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("no reason logged:\n%s", log)
			break
		}
	}

	// POST, bad file: 500 with the reason; POST, good file: 200
	if code, body := post(); code != http.StatusInternalServerError || !strings.Contains(body, "mapping.yml: line 2: field bogus not found") {
		t.Errorf("POST with a bad file: %d %q", code, body)
	}
	waitFor("POST bad", []string{"# TYPE seed_instant gauge", bad}, []string{"# TYPE seed_total"})
	// (an instant: a counter new to a replay needs the next record's bound)
	write(mappingFile, "include: [\"seed.discrete\"]\n")
	write(derivedFile, "# none\n")
	if code, body := post(); code != http.StatusOK {
		t.Errorf("POST with a good file: %d %q", code, body)
	}
	waitFor("POST good", []string{"# TYPE seed_discrete gauge", good}, []string{"# TYPE seed_instant", "my_thrice", "# TYPE seed_total"})
	resp, err := client.Get(base + "/-/reload")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /-/reload: %d, want 405", resp.StatusCode)
	}
}

// TestDemoScrapeLintsClean scrapes serve replaying the embedded demo
// recording, lean labels and full labels, and has promtool check metrics
// lint the whole scrape (self-metrics and target_info included).
func TestDemoScrapeLintsClean(t *testing.T) {
	t.Parallel()
	promtool := e2e.Require(t, "promtool")[0]
	for _, extra := range [][]string{nil, {"--mapping.full-labels"}} {
		addr := e2e.FreeAddr(t)
		base := "http://" + addr
		client := &http.Client{Timeout: 10 * time.Second}
		startExporterTo(t, io.Discard, client, base, append([]string{"serve", "--web.listen-address=" + addr, "--archive=demo/live", "--replay.start=+2s", "--replay.loop"}, extra...)...)
		resp, err := client.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), "kernel_all_load{") {
			t.Fatalf("%v: no PCP samples in the scrape:\n%s", extra, body)
		}
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = strings.NewReader(string(body))
		out, err := cmd.CombinedOutput()
		if err != nil || len(strings.TrimSpace(string(out))) > 0 {
			t.Errorf("%v: promtool check metrics: %v\n%s", extra, err, out)
		}
	}
}

// TestScrapeJobsSelect has a real Prometheus scrape one exporter (the demo
// recording) in two jobs, one selecting PCP subtrees (names=disk), one
// families (name[]=kernel_all_load, name[]=target_info): each job stores
// only its own PCP series, and target_info joins the host name onto them.
func TestScrapeJobsSelect(t *testing.T) {
	t.Parallel()
	e2e.Require(t, "prometheus")
	addr := e2e.FreeAddr(t)
	client := &http.Client{Timeout: 10 * time.Second}
	startExporterTo(t, io.Discard, client, "http://"+addr, "serve", "--web.listen-address="+addr, "--archive=demo/live", "--replay.start=+2s", "--replay.loop")
	base := e2e.StartPrometheus(t, `global: {scrape_interval: 1s}
scrape_configs:
  - job_name: disk
    params: {names: [disk]}
    static_configs: [{targets: ["`+addr+`"]}]
  - job_name: load
    params: {"name[]": [kernel_all_load, target_info]}
    static_configs: [{targets: ["`+addr+`"]}]
`, "")
	names := func(job string) map[string]bool {
		out := map[string]bool{}
		for _, s := range e2e.PromQuery(t, base, `count by (__name__) ({job="`+job+`", __name__!~"scrape_.*|up"})`, time.Time{}) {
			out[s.Metric["__name__"]] = true
		}
		return out
	}
	deadline := time.Now().Add(30 * time.Second)
	var disk, load map[string]bool
	for {
		disk, load = names("disk"), names("load")
		if (disk["disk_dev_read_bytes_total"] && load["kernel_all_load"] && load["target_info"]) || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	for n := range disk {
		if !strings.HasPrefix(n, "disk_") && !strings.HasPrefix(n, "pcp_exporter_") && n != "target_info" && !strings.HasPrefix(n, "go_") && !strings.HasPrefix(n, "process_") && !strings.HasPrefix(n, "promhttp_") {
			t.Errorf("job disk stored %s", n)
		}
	}
	if !disk["disk_dev_read_bytes_total"] || !disk["disk_dev_write_bytes_total"] || disk["kernel_all_load"] {
		t.Errorf("job disk: %v", disk)
	}
	if len(load) != 2 || !load["kernel_all_load"] || !load["target_info"] {
		t.Errorf("job load: %v, want kernel_all_load and target_info", load)
	}
	joined := e2e.PromQuery(t, base, `kernel_all_load{job="load"} * on (job, instance) group_left (hostname, machineid) target_info`, time.Time{})
	if len(joined) != 3 || joined[0].Metric["hostname"] != "vm" || joined[0].Metric["instname"] == "" {
		t.Errorf("kernel_all_load joined with target_info: %+v", joined)
	}
}

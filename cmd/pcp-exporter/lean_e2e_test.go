package main

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
	"github.com/pcp-exporter/pcp-exporter/internal/longtest"
)

// TestLeanDefaultNoSecretsNoChurn is issue 32's acceptance test, done as a
// user would: `serve` with no flags on this host (the local pmcd; the MMV
// directory of an empty PCP_TMP_DIR, so that other tests' MMV files do
// not count) and `serve --archive` following a pmlogger archive that logs
// proc.psinfo.environ and psargs, both scraped by the real Prometheus for
// more than 5 minutes and pushing OTLP (OTEL_EXPORTER_OTLP_ENDPOINT, no
// flag) to a receiver of the test, while the test starts and stops 20
// short-lived processes whose environment and command line carry a marker.
// pmcd (pminfo) and the archive (pmdumplog) must show the marker, so that
// the test can fail; then: no series keyed by a PID, no series created
// after the first scrape but the exporter's self-metrics, no label value
// longer than 1 KiB, and the marker in no scrape, OTLP push, backfill
// output or mapping output.
func TestLeanDefaultNoSecretsNoChurn(t *testing.T) {
	longtest.Skip(t, "5 minutes of Prometheus, pmlogger and processes")
	if raceEnabled {
		t.Skip("a 5-minute end-to-end run: not under the race detector")
	}
	t.Parallel() // waits on peers, not the CPU: beside the other end-to-end runs
	bins := e2e.Require(t, "pmlogger", "pminfo", "prometheus", "pmdumplog")
	e2e.RequirePMCD(t) // pmlogger and the exporters read the system pmcd
	const (
		procs    = 20
		life     = 25 * time.Second
		duration = 5*time.Minute + 10*time.Second
	)
	var rb [12]byte
	rand.Read(rb[:])
	marker := "pcpx-secret-" + hex.EncodeToString(rb[:])
	dir := t.TempDir()

	// pmlogger logs the secrets with the rest, every 2 s
	arch := filepath.Join(dir, "farm", "host")
	if err := os.MkdirAll(arch, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "pmlogger.config")
	logged := "log mandatory on 2 sec {\n proc.psinfo.environ\n proc.psinfo.psargs\n proc.psinfo.utime\n proc.nprocs\n kernel.all.load\n kernel.all.cpu.user\n mem.util.used\n}\n"
	if err := os.WriteFile(cfg, []byte(logged), 0o644); err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(arch, time.Now().UTC().Format("20060102.15.04.05"))
	pl := exec.Command(bins[0], "-t", "2", "-c", cfg, "-l", filepath.Join(dir, "pmlogger.log"), base)
	if err := pl.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pl.Process.Kill(); pl.Wait() })

	// an OTLP/HTTP receiver that keeps whether a push held the marker
	var mu sync.Mutex
	pushes, leaks := 0, 0
	otlp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		mu.Lock()
		pushes++
		if bytes.Contains(b, []byte(marker)) {
			leaks++
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer otlp.Close()
	tmp := filepath.Join(dir, "pcptmp")
	if err := os.MkdirAll(filepath.Join(tmp, "mmv"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + otlp.URL, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf", "PCP_TMP_DIR=" + tmp}

	time.Sleep(5 * time.Second) // pmlogger's first records
	live, follow := e2e.FreeAddr(t), e2e.FreeAddr(t)
	startExporterEnv(t, env, http.DefaultClient, "http://"+live, "serve", "--web.listen-address="+live, "--otlp.interval=5s")
	startExporterEnv(t, env, http.DefaultClient, "http://"+follow, "serve", "--web.listen-address="+follow, "--archive="+filepath.Join(dir, "farm"), "--otlp.interval=5s")
	scrape := func(addr, accept string) string {
		req, _ := http.NewRequest("GET", "http://"+addr+"/metrics", nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	// every source up before the first scrape (pmcd's metadata takes
	// seconds, and minutes on the shared test VM under load: pmcd then
	// needs 2 minutes for pminfo -dt)
	for deadline := time.Now().Add(6 * time.Minute); ; {
		a, b := scrape(live, ""), scrape(follow, "")
		if !strings.Contains(a+b, `pcp_exporter_source_up{reason="`+`down`) && strings.Count(a, `pcp_exporter_source_up{reason=""`) == 2 && strings.Count(b, `pcp_exporter_source_up{reason=""`) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sources not up in 6 minutes:\n%s\n%s", linesContaining(a, "pcp_exporter_source_up"), linesContaining(b, "pcp_exporter_source_up"))
		}
		time.Sleep(3 * time.Second)
	}
	prom := e2e.StartPrometheus(t, fmt.Sprintf(`global:
  scrape_interval: 5s
scrape_configs:
  - job_name: live
    static_configs: [{targets: [%q]}]
  - job_name: archive
    static_configs: [{targets: [%q]}]
`, live, follow), "")
	begin := time.Now()

	// 20 short-lived processes, the marker in their environment and
	// command line, one started every duration/20
	var pids []int
	sawMarker := false
	check := func(body, what string) {
		if strings.Contains(body, marker) {
			t.Errorf("%s holds the marker", what)
		}
	}
	for i := 0; i < procs; i++ {
		p := exec.Command("sh", "-c", "sleep "+strconv.Itoa(int(life.Seconds()))+"; : "+marker)
		p.Env = append(os.Environ(), "PCPX_SECRET_MARKER="+marker)
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, p.Process.Pid)
		go p.Wait()
		t.Cleanup(func() { p.Process.Kill() })
		time.Sleep(2 * time.Second)
		if !sawMarker {
			out, _ := exec.Command(bins[1], "-f", "proc.psinfo.environ").CombinedOutput()
			sawMarker = bytes.Contains(out, []byte(marker))
		}
		for _, addr := range []string{live, follow} {
			check(scrape(addr, ""), "a text scrape of "+addr)
			check(scrape(addr, "application/openmetrics-text;version=1.0.0"), "an OpenMetrics scrape of "+addr)
		}
		time.Sleep(duration/procs - 2*time.Second)
	}
	end := time.Now()
	if !sawMarker {
		t.Fatalf("pmcd never showed the marker in proc.psinfo.environ: the test cannot tell a leak")
	}
	if out, _ := exec.Command(bins[3], base, "proc.psinfo.environ").CombinedOutput(); !bytes.Contains(out, []byte(marker)) {
		t.Errorf("the archive does not hold the marker (pmdumplog): the test cannot tell a leak")
	}

	window := fmt.Sprintf("[%ds]", int(end.Sub(begin).Seconds())+30)
	for _, job := range []string{"live", "archive"} {
		all := e2e.PromQuery(t, prom, fmt.Sprintf(`last_over_time({job=%q}%s)`, job, window), end)
		if len(all) < 20 {
			t.Fatalf("%s: only %d series", job, len(all))
		}
		longest := 0
		for _, s := range all {
			for k, v := range s.Metric {
				longest = max(longest, len(v))
				if len(v) > 1024 {
					t.Errorf("%s: label %s of %s is %d bytes long", job, k, s.Metric["__name__"], len(v))
				}
				if strings.Contains(v, marker) {
					t.Errorf("%s: label %s of %s holds the marker", job, k, s.Metric["__name__"])
				}
				for _, pid := range pids {
					if pidLabel(v, pid) {
						t.Errorf("%s: series keyed by a PID: %v", job, s.Metric)
					}
				}
			}
			if n := s.Metric["__name__"]; strings.HasPrefix(n, "proc_") || strings.HasPrefix(n, "hotproc_") {
				t.Errorf("%s: per-process series %v", job, s.Metric)
			}
		}
		// series that were not in the job's first scrape
		first := e2e.PromQuery(t, prom, fmt.Sprintf(`min_over_time(timestamp(up{job=%q})[%s:5s])`, job, window[1:len(window)-1]), end)
		if len(first) != 1 {
			t.Fatalf("%s: no first scrape: %v", job, first)
		}
		t0, _ := strconv.ParseFloat(fmt.Sprint(first[0].Value[1]), 64)
		const notSelf = `__name__!~"pcp_exporter_.*|go_.*|process_.*|promhttp_.*|up|scrape_.*"`
		at1 := map[string]bool{}
		for _, s := range e2e.PromQuery(t, prom, fmt.Sprintf(`{job=%q,%s}`, job, notSelf), time.UnixMilli(int64(t0*1000)+1000)) {
			at1[fmt.Sprint(s.Metric)] = true
		}
		created := 0
		for _, s := range e2e.PromQuery(t, prom, fmt.Sprintf(`last_over_time({job=%q,%s}%s)`, job, notSelf, window), end) {
			if !at1[fmt.Sprint(s.Metric)] {
				created++
				t.Errorf("%s: series created after the first scrape: %v", job, s.Metric)
			}
		}
		if len(at1) < 5 { // the archive: kernel.all.load (3), kernel.all.cpu.user, mem.util.used, target_info
			t.Fatalf("%s: %d series in the first scrape", job, len(at1))
		}
		scrapes := e2e.PromQuery(t, prom, fmt.Sprintf(`count_over_time(up{job=%q}%s)`, job, window), end)
		t.Logf("%s: %d series, %v scrapes, longest label value %d bytes, %d created after the first scrape", job, len(all), scrapes[0].Value[1], longest, created)
	}
	mu.Lock()
	t.Logf("%d OTLP pushes", pushes)
	if pushes < 10 || leaks > 0 {
		t.Errorf("%d OTLP pushes, %d with the marker", pushes, leaks)
	}
	mu.Unlock()

	// backfill and mapping of the archive
	pl.Process.Signal(os.Interrupt)
	pl.Wait()
	om := filepath.Join(dir, "backfill.om")
	backfillCLI(t, "--output=openmetrics:"+om, base)
	b, err := os.ReadFile(om)
	if err != nil || len(b) < 1000 {
		t.Fatalf("backfill output: %d bytes, %v", len(b), err)
	}
	check(string(b), "the backfill's OpenMetrics output")
	for _, format := range []string{"table", "json"} {
		cmd := exec.Command(os.Args[0], "mapping", "--archive="+base, "--format="+format)
		cmd.Env = append(os.Environ(), "PCP_EXPORTER_TEST_MAIN=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "proc.psinfo.environ") {
			t.Fatalf("mapping --format=%s: %v\n%s", format, err, out)
		}
		check(string(out), "mapping --format="+format)
	}
}

// pidLabel reports whether a label value names a process by its PID (as
// the proc agent's instances do: "012345 sleep", or "12345").
func pidLabel(v string, pid int) bool {
	return regexp.MustCompile(`^0*` + strconv.Itoa(pid) + `( |$)`).MatchString(v)
}

func linesContaining(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

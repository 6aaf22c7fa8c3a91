package main

import (
	"encoding/csv"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
	"github.com/pcp-exporter/pcp-exporter/internal/longtest"
)

// TestProbePrometheus: a real Prometheus scrapes /probe through the
// README's relabelling for two private pmcds (one plain, one with TLS and
// SCRAM-SHA-256 from --pmcd.config): each target's series equal `fetch
// --pmcd` of the same pmcd, and pmcd's count of CREDS PDUs (one per client
// connection) stays flat over 20 scrapes: the connection is pooled.
func TestProbePrometheus(t *testing.T) {
	longtest.Skip(t, "20 Prometheus scrapes of /probe, about 25 s")
	t.Parallel() // waits on peers, not the CPU: beside the other end-to-end runs
	e2e.Require(t, "prometheus", "saslpasswd2")
	const pw = "probe-test-pw-5d1"
	ca := e2e.NewCA(t, "probe")
	now := time.Now()
	srv := ca.Issue(t, "server", []string{"127.0.0.1"}, now.Add(-time.Hour), now.Add(time.Hour), false)
	plain := e2e.StartPMCD(t, e2e.PMCDConfig{})
	secure := e2e.StartPMCD(t, e2e.PMCDConfig{TLS: &srv, Users: map[string]string{"nobody": pw}})
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "pw")
	os.WriteFile(pwFile, []byte(pw+"\n"), 0o600)
	conf := filepath.Join(dir, "pmcd.yml")
	os.WriteFile(conf, []byte(fmt.Sprintf(`auths:
  secure:
    tls: {ca_file: %s}
    sasl: {mechanism: scram-sha-256, username: nobody, password_file: %s}
modules:
  default: {metrics: [pmcd.agent.type, pmcd.agent.status, pmcd.numagents, pmcd.pdu_in.creds]}
probe:
  allow: [127.0.0.0/8]
`, ca.File, pwFile)), 0o644)
	addr := e2e.FreeAddr(t)
	client := &http.Client{Timeout: 10 * time.Second}
	out := startExporter(t, client, "http://"+addr, "serve", "--web.listen-address="+addr, "--mmv.dir="+t.TempDir(), "--pmcd.config="+conf)
	// not allowed, unknown auth: refused before any connection
	for q, code := range map[string]int{"target=10.1.2.3": 403, "target=" + plain.Addr + "&auth=nope": 400, "": 400} {
		resp, err := client.Get("http://" + addr + "/probe?" + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != code {
			t.Errorf("/probe?%s: %d, want %d", q, resp.StatusCode, code)
		}
	}
	base := e2e.StartPrometheus(t, `global: {scrape_interval: 500ms, scrape_timeout: 400ms}
scrape_configs:
  - job_name: pcp
    metrics_path: /probe
    params: {module: [default]}
    static_configs: [{targets: ["`+plain.Addr+`"]}]
    relabel_configs: &relabel
      - source_labels: [__address__]
        target_label: __param_target
      - source_labels: [__param_target]
        target_label: instance
      - target_label: __address__
        replacement: `+addr+`
  - job_name: pcpsecure
    metrics_path: /probe
    params: {module: [default], auth: [secure]}
    static_configs: [{targets: ["`+secure.Addr+`"]}]
    relabel_configs: *relabel
`, "")
	deadline := time.Now().Add(40 * time.Second)
	for {
		res := e2e.PromQuery(t, base, `min(count_over_time(pcp_probe_success[15s]))`, time.Time{})
		if len(res) == 1 && len(e2e.PromQuery(t, base, `count(pcp_probe_success)`, time.Time{})) == 1 {
			if n, _ := strconv.ParseFloat(res[0].Value[1].(string), 64); n >= 22 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus did not scrape /probe 22 times for both targets: %v\n%s", res, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, job := range []string{"pcp", "pcpsecure"} {
		if s := e2e.PromQuery(t, base, `pcp_probe_success{job="`+job+`"}`, time.Time{}); len(s) != 1 || s[0].Value[1] != "1" {
			t.Errorf("job %s: pcp_probe_success %v\n%s", job, s, out)
		}
		// 20 scrapes (10 s at 500 ms) on one connection: no CREDS PDU
		if s := e2e.PromQuery(t, base, `changes(pmcd_pdu_in_creds_total{job="`+job+`"}[10s])`, time.Time{}); len(s) != 1 || s[0].Value[1] != "0" {
			t.Errorf("job %s: pmcd's CREDS count changed over 20 scrapes: %v", job, s)
		}
	}
	for job, target := range map[string]string{"pcp": plain.Addr, "pcpsecure": secure.Addr} {
		args := []string{"fetch", "--pmcd=" + target, "--pmcd.config=" + conf, "pmcd.agent.type", "pmcd.agent.status", "pmcd.numagents"}
		if job == "pcpsecure" {
			args = append(args, "--pmcd.auth=secure")
		}
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), "PCP_EXPORTER_TEST_MAIN=1")
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("fetch %s: %v", target, err)
		}
		rows, err := csv.NewReader(strings.NewReader(string(b))).ReadAll()
		if err != nil || len(rows) < 4 {
			t.Fatalf("fetch %s: %v: %s", target, err, b)
		}
		// every value of fetch is a series of the job with the instance's name as a label
		for _, r := range rows[1:] {
			name := strings.ReplaceAll(r[1], ".", "_")
			sel := fmt.Sprintf(`{__name__=~"%s(_total)?", job="%s"}`, name, job)
			var got []string
			for _, s := range e2e.PromQuery(t, base, sel, time.Time{}) {
				if r[3] == "" || labelValue(s.Metric, r[3]) {
					got = append(got, s.Value[1].(string))
				}
			}
			if len(got) != 1 || got[0] != r[4] {
				t.Errorf("job %s: %s[%s] = %v in Prometheus, fetch --pmcd says %s", job, r[1], r[3], got, r[4])
			}
		}
	}
	if strings.Contains(out.String(), pw) {
		t.Errorf("the password is in the exporter's output")
	}
}

func labelValue(m map[string]string, v string) bool {
	for k, x := range m {
		if x == v && k != "job" && k != "instance" && k != "__name__" {
			return true
		}
	}
	return false
}

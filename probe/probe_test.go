package probe

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/mapping"
)

func writeConfig(t *testing.T, s string) string {
	f := filepath.Join(t.TempDir(), "pmcd.yml")
	if err := os.WriteFile(f, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestLoadErrors(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(pw, []byte("x\n"), 0o600)
	for _, tc := range []struct{ conf, want string }{
		{"auths: {a: {}}", `auth "a": neither tls nor sasl`},
		{"auths: {a: {sasl: {username: u}}}", "one of password_file and password_env"},
		{"auths: {a: {sasl: {username: u, password: x}}}", "field password not found"},
		{"auths: {a: {sasl: {username: u, password_file: /nonexistent}}}", "sasl password: open /nonexistent"},
		{"auths: {a: {sasl: {username: u, password_env: PCPX_TEST_UNSET_VAR}}}", "PCPX_TEST_UNSET_VAR is not set"},
		{"auths: {a: {tls: {ca_file: " + pw + "}}}", "no PEM certificate"},
		{"auths: {a: {tls: {cert_file: " + pw + "}}}", "go together"},
		{"modules: {m: {metrics: [.bad]}}", `module "m"`},
		{"probe: {allow: [a b]}", `probe.allow "a b"`},
		{"bogus: 1", "field bogus not found"},
	} {
		_, err := Load(writeConfig(t, tc.conf))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "pmcd.yml") {
			t.Errorf("%s: %v, want an error naming the file and saying %q", tc.conf, err, tc.want)
		}
	}
	c, err := Load(writeConfig(t, "auths: {a: {sasl: {username: u, password_file: "+pw+"}}}"))
	if err != nil {
		t.Fatal(err)
	}
	sec, _ := c.Security("a")
	if p, _ := sec.SASL.Password(); p != "x" {
		t.Errorf("password %q", p)
	}
	if _, err := c.Security("b"); err == nil || !strings.Contains(err.Error(), "has: a") {
		t.Errorf("unknown auth: %v", err)
	}
}

func TestAllowed(t *testing.T) {
	c, err := Load(writeConfig(t, `probe: {allow: [10.0.0.0/8, "::1", db1.example.com, "unix:/run/pcp/pmcd.socket"]}`))
	if err != nil {
		t.Fatal(err)
	}
	for target, want := range map[string]bool{
		"10.1.2.3": true, "10.1.2.3:44321": true, "11.0.0.1": false, "[::1]:44321": true, "::1": true,
		"DB1.example.com:44321": true, "db2.example.com": false, "unix:/run/pcp/pmcd.socket": true,
		"unix:/tmp/x": false, "127.0.0.1": false, "localhost": false,
	} {
		if c.Allowed(target) != want {
			t.Errorf("Allowed(%q) = %v", target, !want)
		}
	}
	empty, _ := Load(writeConfig(t, ""))
	if empty.Allowed("127.0.0.1") {
		t.Error("an empty allow list allows")
	}
}

// TestPoolLimits: silent pmcds (accepting, never greeting) fill neither
// the pool beyond probe.max_targets nor the probes beyond
// probe.max_concurrent; each probe ends within the scrape timeout.
func TestPoolLimits(t *testing.T) {
	var addrs []string
	for i := 0; i < 4; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
			}
		}()
		addrs = append(addrs, ln.Addr().String())
	}
	cfg, err := Load(writeConfig(t, "probe: {allow: [127.0.0.0/8], max_targets: 2, max_concurrent: 2}"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := mapping.New(nil, mapping.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := New(cfg, m, nil)
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()
	type answer struct {
		code int
		body string
		took time.Duration
	}
	probe := func(a, timeout string) answer {
		req, _ := http.NewRequest("GET", srv.URL+"?target="+a, nil)
		req.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", timeout)
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return answer{}
		}
		b := make([]byte, 4096)
		n, _ := resp.Body.Read(b)
		resp.Body.Close()
		return answer{resp.StatusCode, string(b[:n]), time.Since(start)}
	}
	// two probes hold both slots for 1 s; two more wait at most 0.3 s
	done := make(chan answer, len(addrs))
	for i, a := range addrs {
		timeout := "1.5"
		if i >= 2 {
			timeout = "0.8"
			time.Sleep(200 * time.Millisecond)
		}
		go func() { done <- probe(a, timeout) }()
	}
	var ok, busy int
	for range addrs {
		a := <-done
		switch {
		case a.code == 200 && strings.Contains(a.body, "pcp_probe_success 0"):
			ok++
		case a.code == 503 && strings.Contains(a.body, "probe.max_concurrent"):
			busy++
		default:
			t.Errorf("answer %d %q", a.code, a.body)
		}
		if a.took > 2*time.Second {
			t.Errorf("a probe took %v with a 1.5 s scrape timeout", a.took)
		}
	}
	if ok != 2 || busy != 2 || h.Targets() != 2 {
		t.Errorf("%d probes answered, %d refused as busy, %d targets pooled; want 2, 2, 2", ok, busy, h.Targets())
	}
	// a third target evicts the least recently probed
	if a := probe(addrs[3], "0.8"); a.code != 200 || h.Targets() != 2 {
		t.Errorf("third target: %d, %d pooled", a.code, h.Targets())
	}
}

package probe

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
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

// TestPoolLimits: silent pmcds (accepting, never greeting) do not fill
// the pool beyond probe.max_targets: while two wait for their greeting,
// the probes of two more targets are refused (HTTP 503, counted by
// limit); each probe ends within the scrape timeout. A probe waiting for
// a target's first metadata holds no probe.max_concurrent place
// (TestWaitHoldsNoPlace).
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
	// two probes hold both targets for 1 s; two more are refused
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
		case a.code == 503 && strings.Contains(a.body, "probe.max_targets"):
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
	if f, r := h.count.failed.Load(), h.count.refusedMax.Load(); f != 2 || r != 2 {
		t.Errorf("counted %d failed, %d refused by max_targets; want 2, 2", f, r)
	}
	// a third target evicts the least recently probed
	if a := probe(addrs[3], "0.8"); a.code != 200 || h.Targets() != 2 {
		t.Errorf("third target: %d, %d pooled", a.code, h.Targets())
	}
}

// TestWaitHoldsNoPlace: a probe waiting for a silent pmcd's greeting
// holds no probe.max_concurrent place, so the only place stays free for a
// probe of an answering pmcd (the system pmcd); a probe that finds every
// place taken is refused within its timeout and counted.
func TestWaitHoldsNoPlace(t *testing.T) {
	e2e.RequirePMCD(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	cfg, err := Load(writeConfig(t, "modules: {one: {metrics: [kernel.all.load]}}\nprobe: {allow: [127.0.0.0/8], max_concurrent: 1}"))
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
	probe := func(target, timeout string) (int, string) {
		req, _ := http.NewRequest("GET", srv.URL+"?module=one&target="+target, nil)
		req.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", timeout)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	silent := make(chan int)
	go func() {
		code, _ := probe(ln.Addr().String(), "4")
		silent <- code
	}()
	time.Sleep(200 * time.Millisecond)
	if code, body := probe("127.0.0.1:44321", "3"); code != 200 || !strings.Contains(body, "\npcp_probe_success 1\n") {
		t.Errorf("the system pmcd's probe beside a silent pmcd's: %d %q", code, body)
	}
	if code := <-silent; code != 200 {
		t.Errorf("the silent pmcd's probe: %d", code)
	}
	h.sem <- struct{}{} // every place taken
	start := time.Now()
	code, body := probe("127.0.0.1:44321", "1")
	if code != 503 || !strings.Contains(body, "probe.max_concurrent") || time.Since(start) > 2*time.Second {
		t.Errorf("a probe with every place taken: %d %q after %v", code, body, time.Since(start))
	}
	if n := h.count.refusedConcurrent.Load(); n != 1 {
		t.Errorf("%d refusals by max_concurrent counted, want 1", n)
	}
}

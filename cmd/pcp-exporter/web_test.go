package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
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

// Tests of serve's HTTP server against clients that hold connections
// (issue 27 items 2, 3, 4 and 17). Every client is made here, on loopback,
// and every wait is bounded.

// demoServe starts serve on the embedded demo recording with extra flags.
func demoServe(t *testing.T, flags ...string) (base string, out *lockedBuffer, proc *os.Process) {
	t.Helper()
	addr := e2e.FreeAddr(t)
	base = "http://" + addr
	// no MMV directory: only the demo recording
	out = &lockedBuffer{}
	cmd := startExporterEnvTo(t, []string{"PCP_TMP_DIR=" + t.TempDir()}, out, &http.Client{Timeout: 5 * time.Second}, base,
		append([]string{"serve", "--demo", "--web.listen-address=" + addr}, flags...)...)
	return base, out, cmd.Process
}

// openFDs counts a process's open file descriptors.
func openFDs(t *testing.T, pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Skipf("cannot count descriptors: %v", err)
	}
	return len(ents)
}

// TestServeIdleConnections opens 300 connections that send nothing and
// keep-alive connections left idle: the server accepts at most
// --web.max-connections at once, closes the idle ones after the timeouts,
// and /-/healthy keeps answering (20,000 idle connections used to exhaust
// the descriptors). Not in parallel: its timeouts are of one second.
func TestServeIdleConnections(t *testing.T) {
	base, out, proc := demoServe(t, "--web.max-connections=16", "--web.read-timeout=1s", "--web.idle-timeout=1s")
	addr := strings.TrimPrefix(base, "http://")
	fds0 := openFDs(t, proc.Pid)

	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range 300 {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		conns = append(conns, c)
	}
	time.Sleep(200 * time.Millisecond)
	if fds := openFDs(t, proc.Pid); fds > fds0+16+4 {
		t.Errorf("%d descriptors with 300 idle clients and --web.max-connections=16 (%d before)", fds, fds0)
	}
	// a health check waits for a slot, which the read timeout frees
	client := &http.Client{Timeout: 15 * time.Second}
	began := time.Now()
	resp, err := client.Get(base + "/-/healthy")
	if err != nil {
		t.Fatalf("/-/healthy with 300 idle clients: %v\n%s", err, out.String())
	}
	resp.Body.Close()
	t.Logf("/-/healthy answered after %v with 300 idle clients", time.Since(began))

	// the server closed the idle connections it accepted (they read EOF)
	closed := 0
	for _, c := range conns[:16] {
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == io.EOF {
			closed++
		}
	}
	if closed == 0 {
		t.Error("no idle connection was closed by the server")
	}

	// a keep-alive connection left idle after a request is closed too
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	r, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, r.Body)
	r.Body.Close()
	idleFrom := time.Now()
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("idle keep-alive connection: read %v, want EOF", err)
	}
	if d := time.Since(idleFrom); d > 10*time.Second {
		t.Errorf("idle keep-alive connection closed after %v with --web.idle-timeout=1s", d)
	}
}

// nonReader sends GET path and never reads the answer, with a receive
// buffer as small as the kernel allows.
func nonReader(t *testing.T, addr, path string) net.Conn {
	d := net.Dialer{Timeout: 2 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1) })
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
	return c
}

// bigMMVScript writes an MMV file with libpcp_mmv (python3-pcp): 4
// counters over 20,000 instances, a scrape of about 8 MB.
const bigMMVScript = `
import sys
from pcp import mmv, pmapi
import cmmv
insts = [mmv.mmv_instance(i, "instance_%d_%s" % (i, "x" * 40)) for i in range(20000)]
ind = mmv.mmv_indom(serial=1, shorttext="many", helptext="many instances")
ind.set_instances(insts)
ms = [mmv.mmv_metric(name="m%d" % k, item=k + 1, typeof=cmmv.MMV_TYPE_U64, semantics=cmmv.MMV_SEM_COUNTER,
      dimension=pmapi.pmUnits(0, 0, 1, 0, 0, 0), indom=1, shorttext="a counter", helptext="a counter") for k in range(4)]
v = mmv.MemoryMappedValues("big", 0, 0)
v.add_indoms([ind]); v.add_metrics(ms); v.start(); v.stop()
`

// bigMMVDir returns an MMV directory holding bigMMVScript's file.
func bigMMVDir(t *testing.T) string {
	t.Helper()
	py := "/usr/bin/python3"
	if out, err := exec.Command(py, "-c", "import cmmv").CombinedOutput(); err != nil {
		if e2e.Mandatory() {
			t.Fatalf("python3-pcp: %v\n%s", err, out)
		}
		t.Skipf("python3-pcp not installed: %v", err)
	}
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "mmv")
	os.Mkdir(dir, 0o755)
	cmd := exec.Command(py, "-c", bigMMVScript)
	cmd.Env = append(os.Environ(), "PCP_TMP_DIR="+tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("writing the MMV file with libpcp_mmv: %v\n%s", err, out)
	}
	if st, err := os.Stat(filepath.Join(dir, "big")); err != nil || st.Size() < 1<<20 {
		t.Fatalf("libpcp_mmv wrote no MMV file: %v", err)
	}
	return dir
}

// TestServeNonReadingClients: clients that send a scrape request and never
// read the answer (8 MB), each starting a rendering of its own, hold every
// scrape slot (--web.max-requests) until the write timeout ends them; then
// scrapes succeed again. Not in parallel: under load a rendering outlasts
// the second between the non-readers, the second shares the first's and
// takes no slot (the race detector's CI run saw it).
func TestServeNonReadingClients(t *testing.T) {
	dir := bigMMVDir(t)
	slots := 2
	addr := e2e.FreeAddr(t)
	base := "http://" + addr
	out, _ := startExporterProc(t, &http.Client{Timeout: 5 * time.Second}, base, "serve", "--web.listen-address="+addr,
		"--mmv.dir="+dir, "--no-mmv.pid-check", fmt.Sprintf("--web.max-requests=%d", slots), "--web.write-timeout=3s")
	client := &http.Client{Timeout: 10 * time.Second}
	status := func() int {
		resp, err := client.Get(base + "/metrics")
		if err != nil {
			return 0
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := status(); s != http.StatusOK {
		t.Fatalf("first scrape: %d", s)
	}
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	// one at a time: a scrape that arrives while another's rendering is
	// under way shares it and takes no slot, so each non-reader waits for
	// the rendering before it to end and starts its own
	for range slots {
		held = append(held, nonReader(t, addr, "/metrics"))
		time.Sleep(time.Second)
	}
	began := time.Now()
	s := status()
	if s != http.StatusServiceUnavailable {
		t.Fatalf("scrape with every slot held: %d, want 503", s)
	}
	for s != http.StatusOK && time.Since(began) < 15*time.Second {
		time.Sleep(200 * time.Millisecond)
		s = status()
	}
	if s != http.StatusOK {
		t.Fatalf("slots still held %v after the clients stopped reading (--web.write-timeout=3s)\n%s", time.Since(began), out.String())
	}
	t.Logf("scrapes answered again %v after %d clients stopped reading", time.Since(began), slots)
}

// TestServeHTTPSurface: methods other than GET and HEAD get 405, the
// landing page links no /debug/pprof (none is served), and a missing MMV
// directory is not ready and says so.
func TestServeHTTPSurface(t *testing.T) {
	addr := e2e.FreeAddr(t)
	base := "http://" + addr
	missing := filepath.Join(t.TempDir(), "nonexistent")
	client := &http.Client{Timeout: 5 * time.Second}
	out, _ := startExporterProc(t, client, base, "serve", "--web.listen-address="+addr, "--mmv.dir="+missing)
	do := func(method, path string) (int, string) {
		req, _ := http.NewRequestWithContext(context.Background(), method, base+path, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, m := range []string{"POST", "PUT", "DELETE", "PATCH", "TRACE"} {
		for _, p := range []string{"/metrics", "/", "/-/healthy", "/-/ready"} {
			if s, _ := do(m, p); s != http.StatusMethodNotAllowed {
				t.Errorf("%s %s: %d, want 405", m, p, s)
			}
		}
	}
	if s, _ := do("HEAD", "/-/healthy"); s != http.StatusOK {
		t.Errorf("HEAD /-/healthy: %d", s)
	}
	s, body := do("GET", "/")
	if s != http.StatusOK || strings.Contains(body, "debug/pprof") {
		t.Errorf("landing page: %d, links /debug/pprof: %v", s, strings.Contains(body, "debug/pprof"))
	}
	if s, _ := do("GET", "/debug/pprof/heap"); s == http.StatusOK {
		t.Error("/debug/pprof served")
	}
	if s, _ := do("GET", "/-/ready"); s != http.StatusServiceUnavailable {
		t.Errorf("ready with a missing MMV directory: %d", s)
	}
	_, m := do("GET", "/metrics")
	want := fmt.Sprintf(`pcp_exporter_source_up{reason="missing",source=%q} 0`, missing)
	if !strings.Contains(m, want) {
		t.Errorf("/metrics lacks %s", want)
	}
	do("GET", "/metrics")
	time.Sleep(100 * time.Millisecond)
	if n := strings.Count(out.String(), "MMV directory "+missing+" does not exist"); n != 1 {
		t.Errorf("%d log lines for the missing directory, want 1:\n%s", n, out.String())
	}
}

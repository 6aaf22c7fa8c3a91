package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source/mmv/mmvwrite"
)

// TestMain lets tests run this binary as a subprocess: with
// PCP_EXPORTER_TEST_MAIN=1 the test binary is pcp-exporter. The parallel
// tests run parallelTests at a time unless -parallel says otherwise.
func TestMain(m *testing.M) {
	if os.Getenv("PCP_EXPORTER_TEST_MAIN") == "1" {
		os.Exit(run(os.Args[1:]))
	}
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		flag.Set("test.parallel", fmt.Sprint(parallelTests))
	}
	os.Exit(m.Run())
}

// parallelTests is how many parallel tests run at once by default: they
// wait on their peers (pmlogger's ticks, pmproxy's and pmcd's answers,
// the exporters they start) far more than they use this process's CPU,
// so more than GOMAXPROCS at a time (go test's default) shortens the
// package (alone on 2 cores: 68-85 s against 89 s). Not many more: at 16
// at once the single-threaded system pmcd answered slowly enough to fail
// a follow test's timing.
const parallelTests = 4

// startExporter runs `pcp-exporter args...` and waits until addr answers.
func startExporter(t *testing.T, client *http.Client, base string, args ...string) *lockedBuffer {
	t.Helper()
	out, _ := startExporterProc(t, client, base, args...)
	return out
}

// startExporterProc is startExporter that also returns the process; its
// output buffer is safe to read while the process runs.
func startExporterProc(t *testing.T, client *http.Client, base string, args ...string) (*lockedBuffer, *os.Process) {
	t.Helper()
	out := &lockedBuffer{}
	cmd := startExporterTo(t, out, client, base, args...)
	return out, cmd.Process
}

// startExporterTo is startExporter writing the exporter's output to out; it
// returns the running command.
func startExporterTo(t *testing.T, out io.Writer, client *http.Client, base string, args ...string) *exec.Cmd {
	t.Helper()
	return startExporterEnvTo(t, nil, out, client, base, args...)
}

// startExporterEnv is startExporter with env (NAME=value) added to the
// process's environment: a test that runs in parallel sets the exporter's
// environment this way, never with t.Setenv.
func startExporterEnv(t *testing.T, env []string, client *http.Client, base string, args ...string) *lockedBuffer {
	t.Helper()
	out := &lockedBuffer{}
	startExporterEnvTo(t, env, out, client, base, args...)
	return out
}

// startExporterEnvTo is startExporterTo with env added to the process's
// environment.
func startExporterEnvTo(t *testing.T, env []string, out io.Writer, client *http.Client, base string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), "PCP_EXPORTER_TEST_MAIN=1"), env...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := client.Get(base + "/-/healthy")
		if err == nil {
			resp.Body.Close()
			return cmd
		}
		if time.Now().After(deadline) {
			t.Fatalf("exporter not up: %v\n%s", err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestServeTLSAndBasicAuth serves over TLS with basic auth configured by
// --web.config.file and checks that only authenticated HTTPS requests get
// the metrics.
func TestServeTLSAndBasicAuth(t *testing.T) {
	dir := t.TempDir()
	cert, key, pool := selfSigned(t, dir)
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	webCfg := filepath.Join(dir, "web.yml")
	os.WriteFile(webCfg, []byte(fmt.Sprintf("tls_server_config:\n  cert_file: %s\n  key_file: %s\nbasic_auth_users:\n  prom: %s\n", cert, key, hash)), 0o600)
	addr := e2e.FreeAddr(t)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 10 * time.Second}
	base := "https://" + addr
	out := startExporter(t, client, base, "serve", "--web.listen-address="+addr, "--web.config.file="+webCfg,
		"--archive="+filepath.Join(corpus, "archives", "seedtables", "seedtables"), "--replay.loop")

	get := func(url, user, pass string) (int, string) {
		req, _ := http.NewRequest("GET", url, nil)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get(base+"/metrics", "", ""); code != http.StatusUnauthorized {
		t.Errorf("no credentials: status %d, want 401", code)
	}
	if code, _ := get(base+"/metrics", "prom", "wrong"); code != http.StatusUnauthorized {
		t.Errorf("wrong password: status %d, want 401", code)
	}
	// the chart's probes with basic auth on send the Authorization header
	// (values.yaml): the health paths answer with it and not without
	for _, p := range []string{"/-/healthy", "/-/ready"} {
		if code, _ := get(base+p, "", ""); code != http.StatusUnauthorized {
			t.Errorf("%s without credentials: status %d, want 401", p, code)
		}
		if code, body := get(base+p, "prom", "s3cret"); code != http.StatusOK {
			t.Errorf("%s with credentials: status %d: %s", p, code, body)
		}
	}
	// failed logins are logged, one line per 10 s with the count
	for range 20 {
		get(base+"/metrics", "mallory", "guess")
	}
	if n := strings.Count(out.String(), "failed login"); n < 1 || n > 2 {
		t.Errorf("%d log lines for 21 failed logins in a few ms, want 1 (2 across a 10 s boundary):\n%s", n, out.String())
	}
	if strings.Contains(out.String(), "DATA RACE") {
		t.Errorf("race in the exporter:\n%s", out.String())
	}
	code, body := get(base+"/metrics", "prom", "s3cret")
	if code != http.StatusOK || !strings.Contains(body, "seed_total ") {
		t.Errorf("authenticated: status %d, body lacks seed_total:\n%.400s", code, body)
	}
	plain := &http.Client{Timeout: 5 * time.Second}
	if resp, err := plain.Get("http://" + addr + "/metrics"); err == nil {
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP served the metrics")
		}
		resp.Body.Close()
	}
}

// treeDigest hashes the names, sizes, modes, times and contents of a tree.
func treeDigest(t *testing.T, root string) string {
	h := sha256.New()
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %d %v %v\n", p, info.Size(), info.Mode(), info.ModTime().UnixNano())
		if !d.IsDir() {
			b, _ := os.ReadFile(p)
			h.Write(b)
		}
		return nil
	})
	return fmt.Sprintf("%x", h.Sum(nil))
}

// TestServeNeverWrites serves an MMV directory and archives while they are
// scraped and checks that neither changed (the exporter only reads).
func TestServeNeverWrites(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mmvDir := filepath.Join(dir, "mmv")
	os.Mkdir(mmvDir, 0o755)
	w, err := mmvwrite.New(filepath.Join(mmvDir, "app"), mmvwrite.Config{Metrics: []mmvwrite.MetricDef{
		{Name: "requests", Item: 1, Type: mmvwrite.TypeU64, Sem: semantics.SemCounter, Units: semantics.Units{DimCount: 1}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	w.MustHandle("requests", "").SetUint64(7)
	w.Close()
	arch := filepath.Join(dir, "arch")
	os.Mkdir(arch, 0o755)
	for _, f := range []string{"seedtables.0", "seedtables.meta", "seedtables.index"} {
		b, _ := os.ReadFile(filepath.Join(corpus, "archives", "seedtables", f))
		os.WriteFile(filepath.Join(arch, f), b, 0o444)
	}
	before := treeDigest(t, dir)
	client := &http.Client{Timeout: 10 * time.Second}
	for _, args := range [][]string{{"--mmv.dir=" + mmvDir}, {"--archive=" + filepath.Join(arch, "seedtables"), "--replay.speed=100", "--replay.loop"}} {
		addr := e2e.FreeAddr(t)
		base := "http://" + addr
		startExporter(t, client, base, append([]string{"serve", "--web.listen-address=" + addr}, args...)...)
		for i := 0; i < 5; i++ {
			resp, err := client.Get(base + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !bytes.Contains(b, []byte("pcp_exporter_source_up")) {
				t.Fatalf("bad scrape:\n%.300s", b)
			}
			time.Sleep(50 * time.Millisecond)
		}
		resp, err := client.Get(base + "/-/ready")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("%v: not ready: %v", args, err)
		}
		if resp != nil {
			resp.Body.Close()
		}
	}
	if after := treeDigest(t, dir); after != before {
		t.Error("the MMV directory or the archive changed while being served")
	}
}

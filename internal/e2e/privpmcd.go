package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// PMCDBinary finds pmcd ($PCP_EXPORTER_PMCD, Debian's /usr/lib/pcp/bin,
// Fedora's /usr/libexec/pcp/bin, or PATH), skipping or failing t as
// Require does when there is none.
func PMCDBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("PCP_EXPORTER_PMCD"); p != "" {
		return p
	}
	for _, p := range []string{"/usr/lib/pcp/bin/pmcd", "/usr/libexec/pcp/bin/pmcd"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return Require(t, "pmcd")[0]
}

// PMCDConfig describes a private pmcd.
type PMCDConfig struct {
	// Agents are pmcd.conf agent lines (default: pmcd's own agent and
	// the proc agent; DSOAgents: pmcd, linux and mmv as DSOs).
	Agents string
	// TLS, when set, is written to the pmcd's tls.conf.
	TLS *TLSFiles
	// Users are SASL users (user name: password) in the pmcd's own
	// sasldb, made with saslpasswd2 (sasl2-bin). pmcd switches to the
	// authenticated user, so each must be a local account ("nobody").
	Users map[string]string
	// Mechs is the SASL mech_list (default: plain login scram-sha-256).
	Mechs string
	// Args are extra pmcd options: -S (credentials required), -Q (a
	// client certificate required; pmcd 6.0.3 sets its TLS verification
	// per connection from -Q alone, so tls-verify-clients in its tls.conf
	// would be overridden), -U USER.
	Args []string
	// Hostname, when set, runs the pmcd in a UTS namespace of its own
	// (unshare -u, root only) with this hostname: its context labels
	// (hostname) and pmcd.hostname are another host's, as a remote pmcd's.
	Hostname string
}

// DSOAgents are pmcd.conf lines of the pmcd, linux and mmv agents as DSOs
// in pmcd's own process, as Debian configures them.
const DSOAgents = "pmcd\t2\tdso\tpmcd_init\t/var/lib/pcp/pmdas/pmcd/pmda_pmcd.so\n" +
	"linux\t60\tdso\tlinux_init\t/var/lib/pcp/pmdas/linux/pmda_linux.so\n" +
	"mmv\t70\tdso\tmmv_init\t/var/lib/pcp/pmdas/mmv/pmda_mmv.so\n"

// PMCD is a private pmcd started by a test.
type PMCD struct {
	Addr   string // 127.0.0.1:PORT
	Socket string // its unix socket
	Dir    string
	Log    string
	// MMVDir is the directory its mmv agent reads (PCP_TMP_DIR/mmv: the
	// pmcd's own, not the system's)
	MMVDir string

	t      testing.TB
	args   []string // the command line
	env    []string
	cmd    *exec.Cmd
	exited chan struct{}
	status string // how the last process ended
}

// StartPMCD starts a pmcd of its own (port, unix socket, pmcd.conf,
// tls.conf, SASL configuration, run and tmp directories) listening on
// 127.0.0.1 only, waits until it answers and stops it when the test ends.
// It holds the local pmcd's lock shared meanwhile: /etc/init.d/pmcd
// refuses to restart the system pmcd while another pmcd process runs.
func StartPMCD(t testing.TB, cfg PMCDConfig) *PMCD {
	t.Helper()
	bin := PMCDBinary(t)
	agents := cfg.Agents
	if agents == "" {
		agents = "pmcd\t2\tdso\tpmcd_init\t/var/lib/pcp/pmdas/pmcd/pmda_pmcd.so\n" +
			"proc\t3\tpipe\tbinary\t\t/var/lib/pcp/pmdas/proc/pmdaproc -d 3\n"
	}
	for _, l := range strings.Split(agents, "\n") {
		if f := strings.Fields(l); len(f) >= 5 && f[2] == "dso" {
			if _, err := os.Stat(f[4]); err != nil {
				if Mandatory() {
					t.Fatalf("private pmcd: %v", err)
				}
				t.Skipf("private pmcd: %v (set CI=true to make this a failure)", err)
			}
		}
	}
	LockPMCD(t, false)
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	p := &PMCD{t: t, Addr: FreeAddr(t), Socket: filepath.Join(dir, "pmcd.socket"), Dir: dir, Log: filepath.Join(dir, "pmcd.log"), MMVDir: filepath.Join(dir, "tmp", "mmv")}
	if err := os.MkdirAll(p.MMVDir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	conf := write("pmcd.conf", agents+"\n[access]\ndisallow \".*\" : store;\nallow \".*\" : fetch;\n")
	p.env = append(os.Environ(), "PCP_RUN_DIR="+dir, "PCP_TMP_DIR="+filepath.Join(dir, "tmp"))
	if cfg.TLS != nil {
		tc := fmt.Sprintf("tls-cert-file = %s\ntls-key-file = %s\ntls-ca-cert-file = %s\n", cfg.TLS.Cert, cfg.TLS.Key, cfg.TLS.CA)
		p.env = append(p.env, "PCP_TLSCONF_PATH="+write("tls.conf", tc))
	}
	sasldir := filepath.Join(dir, "sasl")
	os.Mkdir(sasldir, 0o755)
	mechs := cfg.Mechs
	if mechs == "" {
		mechs = "plain login scram-sha-256"
	}
	db := filepath.Join(dir, "passwd.db")
	write("sasl/pmcd.conf", "mech_list: "+mechs+"\nsasldb_path: "+db+"\n")
	p.env = append(p.env, "PCP_SASL2_CONFIG_PATH="+sasldir)
	if len(cfg.Users) > 0 {
		sp := Require(t, "saslpasswd2")[0]
		for u, pw := range cfg.Users {
			c := exec.Command(sp, "-p", "-c", "-f", db, "-a", "pmcd", u)
			c.Stdin = strings.NewReader(pw)
			if out, err := c.CombinedOutput(); err != nil {
				t.Fatalf("saslpasswd2 %s: %v: %s", u, err, out)
			}
		}
	}
	host, port, _ := net.SplitHostPort(p.Addr)
	p.args = append([]string{bin, "-f", "-A", "-i", host, "-p", port, "-s", p.Socket, "-c", conf, "-l", p.Log, "-x", filepath.Join(dir, "pmcd.err")}, cfg.Args...)
	if cfg.Hostname != "" {
		// pmcd's labels read the hostname at start (gethostname), which
		// Go cannot set in the child between the clone and the exec
		un := Require(t, "unshare", "hostname")
		if os.Geteuid() != 0 {
			if Mandatory() {
				t.Fatal("a pmcd of another hostname needs root (unshare -u)")
			}
			t.Skip("a pmcd of another hostname needs root (unshare -u)")
		}
		p.args = append([]string{un[0], "-u", "sh", "-c", `"$0" "$1" && shift && exec "$@"`, un[1], cfg.Hostname}, p.args...)
	}
	p.Start()
	t.Cleanup(func() {
		if p.Alive() {
			p.cmd.Process.Signal(syscall.SIGCONT) // if a test stopped it
			p.cmd.Process.Signal(os.Interrupt)
			select {
			case <-p.exited:
			case <-time.After(5 * time.Second):
				p.cmd.Process.Kill()
				<-p.exited
			}
		}
	})
	return p
}

// Start starts the pmcd (again, after Stop: same port, socket and
// configuration) and waits until it answers on both its socket and port.
func (p *PMCD) Start() {
	t := p.t
	t.Helper()
	os.Remove(p.Socket)
	p.cmd = exec.Command(p.args[0], p.args[1:]...)
	p.cmd.Env = p.env
	p.cmd.Dir = p.Dir
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	p.exited = exited
	cmd := p.cmd
	go func() {
		err := cmd.Wait()
		p.status = "exit status 0"
		if err != nil {
			p.status = err.Error()
		}
		close(exited)
	}()
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("unix", p.Socket, time.Second)
		if err == nil {
			c.SetDeadline(time.Now().Add(time.Second))
			b := make([]byte, 20)
			_, err = c.Read(b)
			c.Close()
			if err == nil {
				if c, err := net.DialTimeout("tcp", p.Addr, time.Second); err == nil {
					c.Close()
					return
				}
			}
		}
		if !p.Alive() {
			t.Fatalf("private pmcd exited (%s): %s", p.status, p.LogTail())
		}
		if time.Now().After(deadline) {
			t.Fatalf("private pmcd did not answer in 15 s: %s", p.LogTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop stops the pmcd (SIGTERM) and waits for it to exit.
func (p *PMCD) Stop() {
	p.t.Helper()
	p.Signal(syscall.SIGTERM)
	<-p.exited
}

// Restart stops the pmcd and starts it again.
func (p *PMCD) Restart() {
	p.t.Helper()
	p.Stop()
	p.Start()
}

// Alive reports whether the pmcd process is running (or stopped).
func (p *PMCD) Alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Signal sends sig to the pmcd, failing the test if it has died.
func (p *PMCD) Signal(sig syscall.Signal) {
	p.t.Helper()
	p.MustBeAlive()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
}

// MustBeAlive fails the test if the pmcd has died (SIGSEGV makes pmcd
// exit with status 11: its SigBad handler).
func (p *PMCD) MustBeAlive() {
	p.t.Helper()
	if !p.Alive() {
		p.t.Fatalf("the private pmcd died: %s (11 is SIGSEGV)\n%s", p.status, p.LogTail())
	}
}

// LogTail is the end of the pmcd's log (15 lines).
func (p *PMCD) LogTail() string {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-15):], "\n")
}

// TLSFiles are PEM files of a certificate, its key and the CA that signed it.
type TLSFiles struct {
	Cert, Key, CA string
}

// CA is a test certificate authority.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	File string // its certificate, PEM
	dir  string
}

// NewCA makes a CA valid for a day, its certificate written in a
// temporary directory.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	ca := &CA{cert: cert, key: key, dir: dir, File: filepath.Join(dir, name+"-ca.pem")}
	writePEM(t, ca.File, "CERTIFICATE", der)
	return ca
}

// Issue makes a certificate for names (DNS names or IP addresses),
// valid from notBefore to notAfter, for a server or a client.
func (ca *CA) Issue(t testing.TB, file string, names []string, notBefore, notAfter time.Time, client bool) TLSFiles {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: names[0]},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalPKCS8PrivateKey(key)
	f := TLSFiles{Cert: filepath.Join(ca.dir, file+".pem"), Key: filepath.Join(ca.dir, file+"-key.pem"), CA: ca.File}
	writePEM(t, f.Cert, "CERTIFICATE", der)
	writePEM(t, f.Key, "PRIVATE KEY", kb)
	return f
}

func writePEM(t testing.TB, file, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
}

// PID is the pmcd's process id.
func (p *PMCD) PID() int { return p.cmd.Process.Pid }

package pmcd

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
)

// privatePMCD is a pmcd of the test's own (never the system's): its own
// TCP port on 127.0.0.1, unix socket, run and tmp directories, with the
// pmcd, linux and mmv agents as DSOs, as Debian configures them.
type privatePMCD struct {
	t      *testing.T
	bin    string
	dir    string
	port   int
	cmd    *exec.Cmd
	exited chan struct{}
	status string // how the last process ended
}

// privatePMCDPorts are tried in turn for a private pmcd's port.
var privatePMCDPorts = [2]int{44399, 44409}

// pmcdBinary finds the pmcd executable: $PCP_EXPORTER_PMCD, else
// PCP_BINADM_DIR of /etc/pcp.conf, else the Debian and Red Hat locations.
func pmcdBinary() (string, error) {
	cands := []string{os.Getenv("PCP_EXPORTER_PMCD")}
	if cands[0] != "" {
		cands = cands[:1]
	} else {
		if b, err := os.ReadFile("/etc/pcp.conf"); err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(l), "PCP_BINADM_DIR="); ok {
					cands = append(cands, filepath.Join(v, "pmcd"))
				}
			}
		}
		cands = append(cands, "/usr/libexec/pcp/bin/pmcd", "/usr/lib/pcp/bin/pmcd")
	}
	for _, c := range cands {
		if c == "" {
			continue
		}
		if fi, err := os.Stat(c); err == nil && fi.Mode()&0o111 != 0 {
			return c, nil
		}
	}
	return "", fmt.Errorf("no pmcd executable among %q", cands)
}

// startPrivatePMCD starts a private pmcd; it is stopped when the test ends.
// It holds the local pmcd's lock shared meanwhile: /etc/init.d/pmcd
// refuses to restart the system pmcd while another pmcd process runs.
func startPrivatePMCD(t *testing.T) *privatePMCD {
	t.Helper()
	e2e.LockPMCD(t, false)
	bin, err := pmcdBinary()
	if err == nil {
		for _, so := range []string{"pmcd/pmda_pmcd.so", "linux/pmda_linux.so", "mmv/pmda_mmv.so"} {
			if _, serr := os.Stat("/var/lib/pcp/pmdas/" + so); serr != nil {
				err = serr
			}
		}
	}
	if err != nil {
		if e2e.Mandatory() {
			t.Fatalf("private pmcd: %v", err)
		}
		t.Skipf("private pmcd: %v (set CI=true to make this a failure)", err)
	}
	dir := t.TempDir()
	for _, d := range []string{"run", "tmp/mmv"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	conf := "pmcd\t2\tdso\tpmcd_init\t/var/lib/pcp/pmdas/pmcd/pmda_pmcd.so\n" +
		"linux\t60\tdso\tlinux_init\t/var/lib/pcp/pmdas/linux/pmda_linux.so\n" +
		"mmv\t70\tdso\tmmv_init\t/var/lib/pcp/pmdas/mmv/pmda_mmv.so\n" +
		"\n[access]\ndisallow \".*\" : store;\ndisallow \":*\" : store;\nallow \"local:*\" : all;\n"
	if err := os.WriteFile(filepath.Join(dir, "pmcd.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &privatePMCD{t: t, bin: bin, dir: dir}
	for port := privatePMCDPorts[0]; port <= privatePMCDPorts[1] && p.port == 0; port++ {
		if ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
			ln.Close()
			p.port = port
		}
	}
	if p.port == 0 {
		t.Fatalf("no free port in %d-%d for a private pmcd", privatePMCDPorts[0], privatePMCDPorts[1])
	}
	p.start()
	t.Cleanup(func() {
		if p.alive() {
			p.cmd.Process.Signal(syscall.SIGCONT)
			p.cmd.Process.Signal(syscall.SIGTERM)
			<-p.exited
		}
	})
	return p
}

func (p *privatePMCD) addr() string { return "127.0.0.1:" + strconv.Itoa(p.port) }

// mmvDir is the directory the private pmcd's mmv agent reads.
func (p *privatePMCD) mmvDir() string { return filepath.Join(p.dir, "tmp/mmv") }

// start starts pmcd and waits until it accepts connections.
func (p *privatePMCD) start() {
	p.t.Helper()
	run := filepath.Join(p.dir, "run")
	os.Remove(filepath.Join(run, "pmcd.socket"))
	u := "root"
	if os.Getuid() != 0 {
		if cu, err := user.Current(); err == nil {
			u = cu.Username
		}
	}
	p.cmd = exec.Command(p.bin, "-f", "-A", "-i", "127.0.0.1", "-p", strconv.Itoa(p.port),
		"-s", filepath.Join(run, "pmcd.socket"), "-l", filepath.Join(run, "pmcd.log"),
		"-c", filepath.Join(p.dir, "pmcd.conf"), "-U", u)
	p.cmd.Env = append(os.Environ(), "PCP_RUN_DIR="+run, "PCP_LOG_DIR="+run, "PCP_TMP_DIR="+filepath.Join(p.dir, "tmp"))
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	exited := make(chan struct{})
	p.exited = exited
	cmd := p.cmd
	go func() {
		err := cmd.Wait()
		p.status = fmt.Sprint(err)
		if err == nil {
			p.status = "exit status 0"
		}
		close(exited)
	}()
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.DialTimeout("tcp", p.addr(), time.Second); err == nil {
			c.Close()
			return
		}
		if !p.alive() || time.Now().After(end) {
			p.t.Fatalf("private pmcd on %s did not start (%s): %s", p.addr(), p.status, p.log())
		}
	}
}

// alive reports whether pmcd is running (or stopped).
func (p *privatePMCD) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// signal sends sig to pmcd, failing the test if it has died.
func (p *privatePMCD) signal(sig syscall.Signal) {
	p.t.Helper()
	p.mustBeAlive()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
}

// mustBeAlive fails the test if pmcd has died (SIGSEGV makes pmcd exit
// with status 11: its SigBad handler).
func (p *privatePMCD) mustBeAlive() {
	p.t.Helper()
	if !p.alive() {
		p.t.Fatalf("the private pmcd died: %s (11 is SIGSEGV)\n%s", p.status, p.log())
	}
}

// restart stops pmcd (SIGTERM) and starts it again.
func (p *privatePMCD) restart() {
	p.t.Helper()
	p.signal(syscall.SIGTERM)
	<-p.exited
	p.start()
}

// log is the end of pmcd's log.
func (p *privatePMCD) log() string {
	f, err := os.Open(filepath.Join(p.dir, "run/pmcd.log"))
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	for sc := bufio.NewScanner(f); sc.Scan(); {
		lines = append(lines, sc.Text())
	}
	return strings.Join(lines[max(0, len(lines)-15):], "\n")
}

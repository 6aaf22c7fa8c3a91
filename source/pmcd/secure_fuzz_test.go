package pmcd

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
)

// Handshake modes of FuzzHandshake: the client's security (a SASL
// mechanism, TLS) and its channel (TCP or the unix socket).
const (
	modePlain = 1
	modeLogin = 2
	modeSCRAM = 3
	modeMech  = 3
	modeTLS   = 4
	modeTCP   = 8
)

// fuzzNonce is SCRAM's client nonce in the recorded exchanges, so that
// pmcd's recorded server-first and server-final messages replay.
var fuzzNonce = []byte("pcp-exporter-fuzz-nonce!")

// securityOf is the client's Security in mode: user nobody with
// testPassword, as the recordings were made.
func securityOf(mode uint16) *Security {
	if mode&(modeMech|modeTLS) == 0 {
		return nil
	}
	sec := &Security{}
	if m := mode & modeMech; m != 0 {
		sec.SASL = scramAuth("nobody", testPassword, []string{"", "PLAIN", "LOGIN", "SCRAM-SHA-256"}[m])
		sec.SASL.nonce = fuzzNonce
	}
	if mode&modeTLS != 0 {
		sec.TLS = &tls.Config{InsecureSkipVerify: true}
	}
	return sec
}

// FuzzHandshake feeds a byte stream as everything pmcd sends from its
// greeting on (feature bits, the secure-ack, TLS records, the SASL
// mechanism list and challenges over ATTR, ERRORs, the handshake probe's
// answer) to the client's handshake in each security mode: an error of one
// line naming the pmcd, quoted and bounded, or a connection, never a panic
// or a hang. The corpus in testdata/fuzz/FuzzHandshake holds what the
// local pmcd and a private TLS/SASL pmcd sent (TestRecordHandshakeSeeds).
func FuzzHandshake(f *testing.F) {
	f.Add(uint16(modeSCRAM), append(greet(featAuth|featHighres), attrPDU([]byte("SCRAM-SHA-256"))...))
	f.Add(uint16(modeLogin), append(append(greet(featAuth|featHighres), attrPDU([]byte("LOGIN"))...), attrPDU([]byte("Username:"))...))
	f.Add(uint16(modeSCRAM|modeTLS|modeTCP), append(greet(featSecure|featSecureAck|featAuth), mkpdu(pduError, be(0))...))
	f.Add(uint16(modeSCRAM), append(greet(featAuth|featCredsReqd), mkpdu(pduError, be(uint32(0xffffac93)))...))
	f.Fuzz(func(t *testing.T, mode uint16, stream []byte) {
		client := replay(t, stream)
		defer client.Close()
		c := &conn{c: client, r: bufio.NewReader(client), peer: "pmcd.fuzz:44321", unix: mode&modeTCP == 0, max: 1 << 20, writeErr: make(chan error, 1), sec: securityOf(mode)}
		err := c.handshake(200 * time.Millisecond)
		if err == nil {
			return
		}
		msg := err.Error()
		if len(msg) > 400 || strings.Contains(msg, "\n") || !utf8.ValidString(msg) || !strings.Contains(msg, "pmcd.fuzz:44321") {
			t.Fatalf("error is not one bounded, quoted line naming the pmcd (%d bytes): %q", len(msg), msg)
		}
	})
}

// replay is the client's end of a socket pair whose other end sends
// stream, then shuts down its writing side (the client reads the end of
// the stream) and reads what the client sends until the client closes.
func replay(t testing.TB, stream []byte) net.Conn {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conns := make([]net.Conn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "replay")
		conns[i], err = net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	server := conns[1].(*net.UnixConn)
	go func() {
		defer server.Close()
		go func() { server.Write(stream); server.CloseWrite() }()
		io.Copy(io.Discard, server)
	}()
	return conns[0]
}

// recorder forwards one connection to a pmcd and records what pmcd sends.
type recorder struct {
	addr string
	mu   sync.Mutex
	got  []byte
	done chan struct{}
}

// record listens on network ("unix": a socket in a temporary directory,
// "tcp": 127.0.0.1) and forwards the first connection to target.
func record(t *testing.T, network, target string) *recorder {
	addr := "127.0.0.1:0"
	if network == "unix" {
		addr = filepath.Join(t.TempDir(), "rec.socket")
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{addr: ln.Addr().String(), done: make(chan struct{})}
	if network == "unix" {
		r.addr = "unix:" + addr
	}
	tn, ta := "tcp", target
	if a, ok := strings.CutPrefix(target, "unix:"); ok {
		tn, ta = "unix", a
	}
	go func() {
		defer close(r.done)
		c, err := ln.Accept()
		ln.Close()
		if err != nil {
			return
		}
		defer c.Close()
		up, err := net.Dial(tn, ta)
		if err != nil {
			return
		}
		defer up.Close()
		go func() { io.Copy(up, c); up.Close() }()
		b := make([]byte, 4096)
		for {
			n, err := up.Read(b)
			r.mu.Lock()
			r.got = append(r.got, b[:n]...)
			r.mu.Unlock()
			if _, werr := c.Write(b[:n]); err != nil || werr != nil {
				return
			}
		}
	}()
	return r
}

// stream is what pmcd sent, once the client has closed.
func (r *recorder) stream() []byte {
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got
}

// TestRecordHandshakeSeeds records, with -update, FuzzHandshake's corpus:
// the local pmcd's handshakes (unix socket, TCP) and a private PCP 6.0.3
// pmcd's with TLS, SASL (PLAIN, LOGIN, SCRAM-SHA-256 with the fixed client
// nonce) and a wrong password. Without -update it checks that each
// recorded stream still replays to the outcome it had.
func TestRecordHandshakeSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzHandshake")
	type seed struct {
		name   string
		mode   uint16
		target func() string
		pw     string
		ok     bool // the replay connects
	}
	var p *e2e.PMCD
	private := func(unix bool) func() string {
		return func() string {
			if unix {
				return "unix:" + p.Socket
			}
			return p.Addr
		}
	}
	seeds := []seed{
		{"local-unix", 0, func() string { return "unix:" + DefaultSocket() }, "", true},
		{"local-tcp", modeTCP, func() string { return "127.0.0.1:44321" }, "", true},
		{"private-tls", modeTLS | modeTCP, private(false), "", false},
		{"private-tls-scram", modeTLS | modeSCRAM | modeTCP, private(false), "", false},
		{"private-tcp-scram", modeSCRAM | modeTCP, private(false), "", true},
		{"private-unix-scram", modeSCRAM, private(true), "", true},
		{"private-unix-plain", modePlain, private(true), "", true},
		{"private-unix-login", modeLogin, private(true), "", true},
		{"private-unix-scram-wrong-password", modeSCRAM, private(true), "not-" + testPassword, false},
	}
	if !*update {
		for _, s := range seeds {
			b, err := os.ReadFile(filepath.Join(dir, "recorded-"+s.name))
			if err != nil {
				t.Fatal(err)
			}
			var mode uint16
			var q string
			if _, err := fmt.Sscanf(string(b), "go test fuzz v1\nuint16(%d)\n[]byte(%q)\n", &mode, &q); err != nil || mode != s.mode {
				t.Fatalf("%s: mode %d, %v", s.name, mode, err)
			}
			client := replay(t, []byte(q))
			c := &conn{c: client, r: bufio.NewReader(client), peer: "replay", unix: mode&modeTCP == 0, max: 1 << 20, writeErr: make(chan error, 1), sec: securityOf(mode)}
			err = c.handshake(5 * time.Second)
			client.Close()
			if (err == nil) != s.ok {
				t.Errorf("%s: replayed, error %v, want connected %v", s.name, err, s.ok)
			}
		}
		return
	}
	ca := e2e.NewCA(t, "seeds")
	now := time.Now()
	srv := ca.Issue(t, "server", []string{"127.0.0.1"}, now.Add(-time.Hour), now.Add(time.Hour), false)
	p = e2e.StartPMCD(t, e2e.PMCDConfig{TLS: &srv, Users: map[string]string{"nobody": testPassword}})
	os.MkdirAll(dir, 0o755)
	for _, s := range seeds {
		target := s.target()
		network := "tcp"
		if strings.HasPrefix(target, "unix:") {
			network = "unix"
		}
		r := record(t, network, target)
		ep, err := ParseSpec(r.addr)
		if err != nil {
			t.Fatal(err)
		}
		ep.sec = securityOf(s.mode)
		if ep.sec != nil && ep.sec.TLS != nil {
			ep.sec.TLS = &tls.Config{RootCAs: pool(t, ca.File)}
		}
		if s.pw != "" {
			pw := s.pw
			ep.sec.SASL.Password = func() (string, error) { return pw, nil }
		}
		c, err := dial(ep, 10*time.Second, DefaultMaxPDU)
		if err == nil {
			c.c.Close()
		} else {
			t.Logf("%s: %v", s.name, err)
		}
		b := r.stream()
		if (err == nil) != (s.ok || s.mode&modeTLS != 0) {
			t.Fatalf("%s: error %v", s.name, err)
		}
		body := fmt.Sprintf("go test fuzz v1\nuint16(%d)\n[]byte(%q)\n", s.mode, b)
		if err := os.WriteFile(filepath.Join(dir, "recorded-"+s.name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d bytes", s.name, len(b))
	}
}

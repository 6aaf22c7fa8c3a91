package pmcd

import (
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// serveHostile accepts one connection at a time on network ("tcp" or
// "unix") and hands it to h.
func serveHostile(t *testing.T, network string, h func(c net.Conn)) string {
	addr := "127.0.0.1:0"
	if network == "unix" {
		addr = filepath.Join(t.TempDir(), "pmcd.socket")
	}
	ln, err := net.Listen(network, addr)
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
			go func() { defer c.Close(); h(c) }()
		}
	}()
	if network == "unix" {
		return "unix:" + addr
	}
	return ln.Addr().String()
}

// readN reads and discards n bytes (a PDU the fake does not look at).
func readPDUFrom(c net.Conn) []byte {
	h := make([]byte, 12)
	if _, err := io.ReadFull(c, h); err != nil {
		return nil
	}
	n := binary.BigEndian.Uint32(h)
	if n < 12 || n > 1<<16 {
		return nil
	}
	b := make([]byte, n)
	copy(b, h)
	io.ReadFull(c, b[12:])
	return b
}

func attrPDU(v []byte) []byte {
	return append(be(uint32(16+len(v)), pduAttr, 0, 0), v...)
}

func greet(features uint32) []byte { return mkpdu(pduError, be(0, 2<<24|1<<16|features)) }

// TestSecureHostile: a pmcd that does not offer what is configured,
// refuses or breaks TLS, or sends a hostile or endless SASL exchange
// gives one clear line naming it, in time, never a plaintext fallback.
func TestSecureHostile(t *testing.T) {
	ca := e2e.NewCA(t, "hostile")
	now := time.Now()
	files := ca.Issue(t, "server", []string{"127.0.0.1"}, now.Add(-time.Hour), now.Add(time.Hour), false)
	pair, err := tls.LoadX509KeyPair(files.Cert, files.Key)
	if err != nil {
		t.Fatal(err)
	}
	tlsSec := &Security{TLS: &tls.Config{RootCAs: pool(t, ca.File)}}
	scramSec := &Security{SASL: scramAuth("u", "secret-pw", "")}
	loginSec := &Security{SASL: scramAuth("u", "secret-pw", "LOGIN")}
	const secure = featSecure | featSecureAck | featHighres | featDescs | featLabels
	// scramFirst answers the mechanism list and the client-first message
	// with first(client nonce)
	scramFirst := func(first func(nonce string) string) func(c net.Conn) {
		return func(c net.Conn) {
			c.Write(greet(featAuth | featHighres))
			readPDUFrom(c)
			c.Write(attrPDU([]byte("SCRAM-SHA-256")))
			msg := readPDUFrom(c)
			_, nonce, _ := strings.Cut(string(msg), ",r=")
			c.Write(attrPDU([]byte(first(nonce))))
			time.Sleep(time.Second)
		}
	}
	cases := []struct {
		name, network string
		sec           *Security
		h             func(c net.Conn)
		want          string
	}{
		{"no tls offered", "tcp", tlsSec, func(c net.Conn) {
			c.Write(greet(featAuth | featHighres))
			readPDUFrom(c)
		}, "does not offer TLS"},
		{"no auth offered", "tcp", scramSec, func(c net.Conn) {
			c.Write(greet(featHighres))
			readPDUFrom(c)
		}, "does not offer authentication"},
		{"secure-ack refusal", "tcp", tlsSec, func(c net.Conn) {
			c.Write(greet(secure))
			readPDUFrom(c)
			c.Write(mkpdu(pduError, be(uint32(0xffffcf82)))) // PM_ERR_TLS
			time.Sleep(time.Second)
		}, "refused TLS: TLS protocol failure"},
		{"plaintext after the ack", "tcp", tlsSec, func(c net.Conn) {
			c.Write(greet(secure))
			readPDUFrom(c)
			c.Write(append(mkpdu(pduError, be(0)), mkpdu(pduPMNSIDs, be(1, 1))...))
			time.Sleep(time.Second)
		}, "plaintext bytes before the TLS handshake"},
		{"alert instead of a handshake", "tcp", tlsSec, func(c net.Conn) {
			c.Write(greet(secure))
			readPDUFrom(c)
			c.Write(mkpdu(pduError, be(0)))
			c.Read(make([]byte, 512))
			c.Write([]byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28}) // fatal handshake_failure
			time.Sleep(time.Second)
		}, "pmcd rejected the TLS handshake"},
		{"alert mid-stream", "tcp", tlsSec, func(c net.Conn) {
			c.Write(greet(secure))
			readPDUFrom(c)
			c.Write(mkpdu(pduError, be(0)))
			tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{pair}})
			if tc.Handshake() != nil {
				return
			}
			readPDUFrom(tc)
			c.Write([]byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x50}) // a plaintext internal_error alert
			time.Sleep(time.Second)
		}, "bad record MAC"},
		{"silent after tls", "tcp", tlsSec, func(c net.Conn) {
			c.Write(greet(secure))
			readPDUFrom(c)
			c.Write(mkpdu(pduError, be(0)))
			tls.Server(c, &tls.Config{Certificates: []tls.Certificate{pair}}).Handshake()
			time.Sleep(3 * time.Second)
		}, "no answer to the handshake within"},
		{"huge scram iterations", "tcp", scramSec, func(c net.Conn) {
			c.Write(greet(featAuth | featHighres))
			readPDUFrom(c)
			c.Write(attrPDU([]byte("SCRAM-SHA-256")))
			first := readPDUFrom(c)
			_, nonce, _ := strings.Cut(string(first), ",r=")
			c.Write(attrPDU([]byte("r=" + nonce + "X,s=c2FsdA==,i=2000000000")))
			time.Sleep(time.Second)
		}, "iteration count"},
		{"oversized challenge", "tcp", scramSec, func(c net.Conn) {
			c.Write(greet(featAuth | featHighres))
			readPDUFrom(c)
			c.Write(attrPDU([]byte("SCRAM-SHA-256")))
			readPDUFrom(c)
			c.Write(attrPDU(make([]byte, 100000)))
			time.Sleep(time.Second)
		}, "ATTR at byte 0: length 100016 outside"},
		{"scram iterations 2^31", "tcp", scramSec, scramFirst(func(n string) string {
			return "r=" + n + "X,s=c2FsdA==,i=2147483648"
		}), `iteration count "2147483648" outside [4096, 1048576]`},
		{"scram nonce not the client's", "tcp", scramSec, scramFirst(func(n string) string {
			return "r=AAAA" + n + ",s=c2FsdA==,i=4096"
		}), "does not extend the client's"},
		{"scram nonce not printable", "tcp", scramSec, scramFirst(func(n string) string {
			return "r=" + n + "\xff\xfe\x1b[2J,s=c2FsdA==,i=4096"
		}), `has forbidden characters`},
		{"scram malformed non-utf8", "tcp", scramSec, scramFirst(func(string) string {
			return "\xc3\x28garbage\x00\xff"
		}), `server-first message "\xc3(garbage\x00\xff": attribute 1 is not K=V`},
		{"scram server error", "tcp", scramSec, scramFirst(func(string) string {
			return "e=\xffother-error"
		}), `attribute 1 is "e", want r, s, i in order`},
		{"scram challenge after challenge", "tcp", scramSec, func(c net.Conn) {
			c.Write(greet(featAuth | featHighres))
			readPDUFrom(c)
			c.Write(attrPDU([]byte("SCRAM-SHA-256")))
			_, nonce, _ := strings.Cut(string(readPDUFrom(c)), ",r=")
			for {
				if _, err := c.Write(attrPDU([]byte("r=" + nonce + "X,s=c2FsdA==,i=4096"))); err != nil || readPDUFrom(c) == nil {
					return
				}
			}
		}, `server-final message "r=`},
		{"tls handshake stalls", "tcp", tlsSec, func(c net.Conn) {
			c.Write(greet(secure))
			readPDUFrom(c)
			c.Write(mkpdu(pduError, be(0)))
			c.Read(make([]byte, 4096)) // the ClientHello, never answered
			time.Sleep(3 * time.Second)
		}, "no TLS handshake in time"},
		{"garbage mechanisms", "tcp", scramSec, func(c net.Conn) {
			c.Write(greet(featAuth | featHighres))
			readPDUFrom(c)
			c.Write(attrPDU([]byte(strings.Repeat("\xff\x01 ", 1000))))
			time.Sleep(time.Second)
		}, "no usable SASL mechanism offered"},
		{"endless login", "unix", loginSec, func(c net.Conn) {
			c.Write(greet(featAuth | featHighres))
			readPDUFrom(c)
			c.Write(attrPDU([]byte("LOGIN")))
			for readPDUFrom(c) != nil {
				c.Write(attrPDU([]byte("More:")))
			}
		}, "the SASL exchange went on after LOGIN completed"},
		{"sasl refusal", "unix", loginSec, func(c net.Conn) {
			c.Write(greet(featAuth | featHighres))
			readPDUFrom(c)
			c.Write(attrPDU([]byte("LOGIN")))
			readPDUFrom(c)
			c.Write(mkpdu(pduError, be(uint32(0xffffac93)))) // PM_ERR_NYI + SASL_BADAUTH
			time.Sleep(time.Second)
		}, `authentication as "u" with LOGIN failed: Authentication - authentication failure`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr := serveHostile(t, tc.network, tc.h)
			ep, err := ParseSpec(addr)
			if err != nil {
				t.Fatal(err)
			}
			ep.sec = tc.sec
			start := time.Now()
			c, err := dial(ep, testTimeout, DefaultMaxPDU)
			if err == nil {
				c.close()
				t.Fatal("connected")
			}
			msg := err.Error()
			t.Log(msg)
			if !strings.Contains(msg, tc.want) || !strings.Contains(msg, strings.TrimPrefix(addr, "unix:")) || strings.Contains(msg, "\n") || strings.Contains(msg, "secret-pw") || !utf8.ValidString(msg) || strings.ContainsRune(msg, utf8.RuneError) {
				t.Errorf("error %q: want one line naming %s, saying %q, without the password, untrusted bytes quoted", msg, addr, tc.want)
			}
			if d := time.Since(start); d > 3*testTimeout {
				t.Errorf("took %v", d)
			}
		})
	}
}

// TestTLSWithoutSecureAck: a pmcd offering TLS without SECURE_ACK (before
// PCP 3.9.10) starts TLS right after CREDS, as libpcp expects (no ack is
// waited for), and the handshake's requests follow inside TLS.
func TestTLSWithoutSecureAck(t *testing.T) {
	ca := e2e.NewCA(t, "noack")
	now := time.Now()
	files := ca.Issue(t, "server", []string{"127.0.0.1"}, now.Add(-time.Hour), now.Add(time.Hour), false)
	pair, err := tls.LoadX509KeyPair(files.Cert, files.Key)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan []uint32, 1)
	addr := serveHostile(t, "tcp", func(c net.Conn) {
		c.Write(greet(featSecure | featHighres))
		creds := readPDUFrom(c)
		if creds == nil || binary.BigEndian.Uint32(creds[16:])&0xffff != featSecure {
			got <- nil
			return
		}
		tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{pair}})
		var types []uint32
		for len(types) < 2 {
			p := readPDUFrom(tc)
			if p == nil {
				break
			}
			types = append(types, binary.BigEndian.Uint32(p[4:]))
		}
		tc.Write(mkpdu(pduPMNSIDs, be(1, 1, 2<<22)))
		got <- types
		time.Sleep(time.Second)
	})
	ep, _ := ParseSpec(addr)
	ep.sec = &Security{TLS: &tls.Config{RootCAs: pool(t, ca.File)}}
	c, err := dial(ep, testTimeout, DefaultMaxPDU)
	if err != nil {
		t.Fatal(err)
	}
	c.close()
	if types := <-got; len(types) != 2 || types[0] != pduProfile || types[1] != pduPMNSNames {
		t.Fatalf("requests after TLS: %x", types)
	}
}

// TestTLSAlertDuringFetch: a pmcd that ends its TLS session in the middle
// of a fetch (an alert instead of the result) takes the source down with
// one line naming it, within the fetch timeout, and the source comes back
// when pmcd behaves again.
func TestTLSAlertDuringFetch(t *testing.T) {
	ca := e2e.NewCA(t, "alert")
	now := time.Now()
	files := ca.Issue(t, "server", []string{"127.0.0.1"}, now.Add(-time.Hour), now.Add(time.Hour), false)
	pair, err := tls.LoadX509KeyPair(files.Cert, files.Key)
	if err != nil {
		t.Fatal(err)
	}
	raw := func(c net.Conn) net.Conn { return c.(*tls.Conn).NetConn() }
	cases := []struct {
		name  string
		fetch func(c net.Conn, pmids []uint32) bool
		want  string
	}{
		{"close_notify", func(c net.Conn, _ []uint32) bool {
			c.(*tls.Conn).CloseWrite() // an encrypted close_notify alert
			time.Sleep(time.Second)
			return false
		}, "EOF"},
		{"plaintext fatal alert", func(c net.Conn, _ []uint32) bool {
			raw(c).Write([]byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x50}) // internal_error
			time.Sleep(time.Second)
			return false
		}, "tls: bad record MAC"},
		{"half a result then garbage records", func(c net.Conn, pmids []uint32) bool {
			c.Write(goodResult(pmids)[:20])
			raw(c).Write([]byte{0x17, 0x03, 0x03, 0x00, 0x05, 0xff, 0xfe, 0xfd, 0xfc, 0xfb})
			time.Sleep(time.Second)
			return false
		}, "tls: bad record MAC"},
		{"stalls inside TLS", func(c net.Conn, _ []uint32) bool {
			time.Sleep(2 * time.Second)
			return false
		}, "no answer in time"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(f *fakePMCD) { f.tls = &tls.Config{Certificates: []tls.Certificate{pair}} })
			s, err := New(f.addr(), Options{Timeout: testTimeout, Backoff: []time.Duration{time.Millisecond},
				Security: &Security{TLS: &tls.Config{RootCAs: pool(t, ca.File)}}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.Connect(); err != nil {
				t.Fatal(err)
			}
			f.setFetch(tc.fetch)
			var res source.Result
			start := time.Now()
			if err := s.Fetch(time.Now(), fakePMIDs, &res); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > testTimeout+time.Second {
				t.Errorf("fetch took %v", d)
			}
			st := s.Status(time.Now())
			t.Log(st.Detail)
			if st.Reason != source.ReasonDown || !strings.Contains(st.Detail, tc.want) || !strings.Contains(st.Detail, f.addr()) || strings.Contains(st.Detail, "\n") {
				t.Fatalf("status %+v, want down, one line naming %s and saying %q", st, f.addr(), tc.want)
			}
			f.setFetch(nil)
			waitUp(t, s)
			if err := s.Fetch(time.Now(), fakePMIDs, &res); err != nil || res.Sets[0].Err != nil {
				t.Fatalf("after recovery: %v, set %+v", err, res.Sets[0])
			}
		})
	}
}

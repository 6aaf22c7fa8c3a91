package pmcd

import (
	"bufio"

	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pcp-exporter/pcp-exporter/internal/pcpwire"
)

// Endpoint is where a pmcd listens: a unix socket path or a TCP address.
type Endpoint struct {
	Network string // "unix" or "tcp"
	Address string
	// fallback is tried when a default unix socket is missing (libpcp's
	// local: tries the socket, then TCP localhost).
	fallback *Endpoint
	// sec is the TLS and authentication to use (secure.go).
	sec *Security
}

// String is the endpoint as a spec (unix:PATH or HOST:PORT).
func (e Endpoint) String() string {
	if e.Network == "unix" {
		return "unix:" + e.Address
	}
	return e.Address
}

// ParseSpec parses a pmcd specification: "" or "local:" for the local pmcd
// ($PMCD_SOCKET, else $PCP_RUN_DIR/pmcd.socket, falling back to TCP
// localhost as libpcp does), "unix:PATH" or an absolute PATH for a unix
// socket, HOST or HOST:PORT for TCP (port $PMCD_PORT, else 44321).
func ParseSpec(spec string) (Endpoint, error) {
	port := "44321"
	if p := os.Getenv("PMCD_PORT"); p != "" {
		port, _, _ = strings.Cut(p, ",")
	}
	switch {
	case spec == "" || spec == "local:":
		tcp := Endpoint{Network: "tcp", Address: net.JoinHostPort("localhost", port)}
		return Endpoint{Network: "unix", Address: DefaultSocket(), fallback: &tcp}, nil
	case strings.HasPrefix(spec, "unix:"):
		if len(spec) == len("unix:") {
			return Endpoint{}, fmt.Errorf("pmcd %q: no socket path after the unix: prefix", spec)
		}
		return Endpoint{Network: "unix", Address: spec[len("unix:"):]}, nil
	case strings.HasPrefix(spec, "/"):
		return Endpoint{Network: "unix", Address: spec}, nil
	}
	host, p, err := net.SplitHostPort(spec)
	if err != nil {
		host, p = strings.Trim(spec, "[]"), port
	}
	if host == "" || strings.ContainsAny(host, "/ ") {
		return Endpoint{}, fmt.Errorf("pmcd %q: not local:, unix:PATH or HOST[:PORT]", spec)
	}
	if n, err := strconv.Atoi(p); err != nil || n <= 0 || n > 65535 {
		return Endpoint{}, fmt.Errorf("pmcd %q: bad port %q", spec, p)
	}
	return Endpoint{Network: "tcp", Address: net.JoinHostPort(host, p)}, nil
}

// DefaultSocket is the local pmcd's unix socket: $PMCD_SOCKET, else
// $PCP_RUN_DIR/pmcd.socket, else PCP_RUN_DIR of /etc/pcp.conf (or
// $PCP_CONF), else /run/pcp/pmcd.socket.
func DefaultSocket() string {
	if s := os.Getenv("PMCD_SOCKET"); s != "" {
		return s
	}
	dir := os.Getenv("PCP_RUN_DIR")
	if dir == "" {
		conf := os.Getenv("PCP_CONF")
		if conf == "" {
			conf = "/etc/pcp.conf"
		}
		if b, err := os.ReadFile(conf); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(line), "PCP_RUN_DIR="); ok {
					dir = strings.Trim(v, `"'`)
				}
			}
		}
	}
	if dir == "" {
		dir = "/run/pcp"
	}
	return dir + "/pmcd.socket"
}

// conn is one connection to pmcd after the handshake.
type conn struct {
	c        net.Conn
	r        *bufio.Reader
	peer     string
	unix     bool
	features uint32
	max      int
	rbuf     []byte
	w        pcpwire.Encoder
	// writeErr receives the result of a pipelined write.
	writeErr chan error
	// sent counts the requests sent by exchange.
	sent int
	// flags are pmcd's change flags seen while reading metadata (off the
	// steady fetch path), for the source to act on once it installs c.
	flags int32
	// limit bounds the instances and label sets decoded per PDU (0: none).
	limit int
	// fetchTimeout bounds a fetch made while reading the metadata
	// (primeAgents, readStarts) as a scrape's fetch is bounded (0: the
	// metadata's deadline only; fetchDeadline)
	fetchTimeout time.Duration
	// dropped says a reply buffer too big to keep was dropped (release).
	dropped bool
	sec     *Security
	mech    string // the SASL mechanism used
	// certAsked: pmcd asked for a client certificate and Security has none
	certAsked bool
}

// ErrUnsupportedSecurity is returned for a pmcd that requires
// authentication or a client certificate the Source is not configured
// with (Options.Security).
var ErrUnsupportedSecurity = errors.New("requires authentication this client is not configured for")

// dialConn connects to ep and runs the handshake within timeout.
func dialConn(ep Endpoint, timeout time.Duration, max int) (*conn, error) {
	d := net.Dialer{Timeout: timeout}
	c, err := d.Dial(ep.Network, ep.Address)
	if err != nil && ep.fallback != nil && ep.Network == "unix" {
		if _, serr := os.Stat(ep.Address); serr != nil {
			fb := *ep.fallback
			fb.sec = ep.sec
			return dialConn(fb, timeout, max)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("pmcd at %s: %w", ep, err)
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	cn := &conn{c: c, r: bufio.NewReaderSize(c, readerSize), peer: ep.String(), unix: ep.Network == "unix", max: max, writeErr: make(chan error, 1), sec: ep.sec}
	if err := cn.handshake(timeout); err != nil {
		c.Close()
		return nil, err
	}
	return cn, nil
}

// close closes the connection without a reset: it is shut for writing,
// and what pmcd still sends (the late answer to a fetch that timed out) is
// read and discarded in the background until pmcd closes its side (at
// most drainTimeout and the largest PDU's worth), so that pmcd answers and
// then sees the client leave, as after any client's departure, instead of
// failing its write on a reset mid-fetch.
func (c *conn) close() {
	cw, ok := c.c.(interface{ CloseWrite() error })
	if !ok || c.c.SetDeadline(time.Now().Add(drainTimeout)) != nil || cw.CloseWrite() != nil {
		c.c.Close()
		return
	}
	go func() {
		var b [4096]byte
		for n := 0; n <= c.max; {
			m, err := c.c.Read(b[:])
			if err != nil {
				break
			}
			n += m
		}
		c.c.Close()
	}()
}

// readerSize is the size of a connection's reply reader.
const readerSize = 16 << 10

// drainTimeout bounds how long a closed connection waits for pmcd to close
// its side.
const drainTimeout = 30 * time.Second

// readers are the reply readers of connections between fetches: a pooled
// /probe target's connection is idle most of the time, and its reader
// (16 KiB) is put back here after each probe (releaseReader).
var readers sync.Pool

// releaseReader gives the reply reader back to readers, unless pmcd sent
// something not yet read.
func (c *conn) releaseReader() {
	if c.r == nil || c.r.Buffered() != 0 {
		return
	}
	c.r.Reset(nil)
	readers.Put(c.r)
	c.r = nil
}

// reader returns the reply reader, taking one from readers after
// releaseReader.
func (c *conn) reader() *bufio.Reader {
	if c.r == nil {
		if r, ok := readers.Get().(*bufio.Reader); ok {
			r.Reset(c.c)
			c.r = r
		} else {
			c.r = bufio.NewReaderSize(c.c, readerSize)
		}
	}
	return c.r
}

func (c *conn) read() (pdu, error) {
	p, buf, err := readPDU(c.reader(), c.rbuf, c.max, c.peer)
	c.rbuf = retain(buf, &c.dropped)
	if err != nil {
		var fe *FormatError
		if !errors.As(err, &fe) && !strings.HasPrefix(err.Error(), "pmcd at ") {
			err = fmt.Errorf("pmcd at %s: %w", c.peer, err)
		}
	}
	return p, err
}

// handshake reads pmcd's greeting and sends CREDS, the default PROFILE and
// a probe whose answer proves both were accepted (a refusal of either is an
// ERROR pmcd sends unasked, §7.2 of the protocol).
func (c *conn) handshake(timeout time.Duration) error {
	c.c.SetDeadline(time.Now().Add(timeout))
	defer c.c.SetDeadline(time.Time{})
	p, err := c.read()
	if err != nil {
		if isTimeout(err) {
			return fmt.Errorf("pmcd at %s: no greeting within %v", c.peer, timeout)
		}
		return err
	}
	if p.typ != pduError || len(p.b) != 20 {
		return &FormatError{Peer: c.peer, PDU: pduName(p.typ), Offset: 0, Msg: fmt.Sprintf("greeting of %d bytes is not the 20-byte ERROR pmcd sends first", len(p.b))}
	}
	d := decoder(p)
	code := d.I32()
	info := d.U32()
	if code != 0 {
		return fmt.Errorf("pmcd at %s refused the connection: %v", c.peer, pmErr(v1ToV2(code)))
	}
	if v := info >> 24 & 0x7f; v != 2 {
		return &FormatError{Peer: c.peer, PDU: "ERROR", Offset: 16, Msg: fmt.Sprintf("protocol version %d, want 2", v)}
	}
	c.features = info & 0xffff
	var flags uint32
	if c.features&featCredsReqd != 0 {
		if !c.unix && !c.authConfigured() {
			return fmt.Errorf("pmcd at %s %w (it asks for credentials: configure SASL or use its unix socket)", c.peer, ErrUnsupportedSecurity)
		}
		flags |= featCredsReqd
	}
	secure, err := c.secureFlags()
	if err != nil {
		return err
	}
	flags |= secure
	w := &c.w
	w.B = w.B[:0]
	w.Begin(pduCreds)
	w.U32(1)
	w.U32(1<<24 | 2<<16 | flags)
	w.Finish()
	if secure&^featCertReqd != 0 {
		if err := c.upgrade(flags, time.Now().Add(timeout)); err != nil {
			return err
		}
	}
	w.Begin(pduProfile)
	w.U32(0) // ctxid
	w.U32(0) // include everything
	w.U32(0) // no per-indom entries
	w.U32(0)
	w.Finish()
	w.Begin(pduPMNSNames)
	w.U32(uint32(len("pmcd.hostname") + 1))
	w.U32(0)
	w.U32(1)
	w.Str("pmcd.hostname")
	w.Finish()
	if _, err := c.c.Write(w.B); err != nil {
		return c.peerErr(err)
	}
	p, err = c.read()
	if err != nil {
		if isTimeout(err) {
			return fmt.Errorf("pmcd at %s: no answer to the handshake within %v", c.peer, timeout)
		}
		return c.peerErr(err)
	}
	switch p.typ {
	case pduPMNSIDs:
		return nil
	case pduError:
		code, err := errorCode(p, c.peer)
		if err != nil {
			return err
		}
		if code == -12357 { // PM_ERR_NAME: a pmcd without pmcd.hostname still answered
			return nil
		}
		if c.authConfigured() {
			return c.authError(code)
		}
		return fmt.Errorf("pmcd at %s refused the client's credentials or profile: %v", c.peer, pmErr(code))
	case pduAttr:
		if c.authConfigured() {
			return fmt.Errorf("pmcd at %s: the SASL exchange went on after %s completed", c.peer, c.mech)
		}
		return fmt.Errorf("pmcd at %s %w (it started an authentication exchange)", c.peer, ErrUnsupportedSecurity)
	}
	return &FormatError{Peer: c.peer, PDU: pduName(p.typ), Offset: 4, Msg: "unexpected reply to the handshake"}
}

func isLoopback(a net.Addr) bool {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.IsLoopback()
	}
	return true
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// exchange sends the requests built in c.w (n of them) and hands each of
// the n replies, in order, to handle, all within deadline. The requests
// are written by another goroutine while the replies are read, so neither
// side's socket buffer can fill up and block both.
func (c *conn) exchange(deadline time.Time, n int, handle func(i int, p pdu) error) error {
	c.c.SetDeadline(deadline)
	c.sent += n
	if len(c.w.B) <= 64<<10 {
		if _, err := c.c.Write(c.w.B); err != nil {
			return c.ioErr(err)
		}
		return c.replies(n, handle)
	}
	go func() {
		_, err := c.c.Write(c.w.B)
		c.writeErr <- err
	}()
	err := c.replies(n, handle)
	if err != nil {
		c.c.Close() // unblocks the writer
	}
	if werr := <-c.writeErr; werr != nil && err == nil {
		err = c.ioErr(werr)
	}
	return err
}

func (c *conn) replies(n int, handle func(i int, p pdu) error) error {
	for i := 0; i < n; i++ {
		p, err := c.read()
		if err != nil {
			return c.ioErr(err)
		}
		if err := handle(i, p); err != nil {
			return err
		}
	}
	return nil
}

func (c *conn) ioErr(err error) error {
	if isTimeout(err) {
		return fmt.Errorf("pmcd at %s: no answer in time (%w)", c.peer, errTimeout)
	}
	if strings.HasPrefix(err.Error(), "pmcd at ") {
		return err
	}
	return fmt.Errorf("pmcd at %s: %w", c.peer, err)
}

var errTimeout = errors.New("deadline exceeded")

// replyError turns an ERROR reply into its PCP error, and any other type
// than want into a FormatError.
func (c *conn) expect(p pdu, want uint32) error {
	if p.typ == want {
		return nil
	}
	if p.typ == pduError {
		code, err := errorCode(p, c.peer)
		if err != nil {
			return err
		}
		if code >= 0 {
			return &FormatError{Peer: c.peer, PDU: "ERROR", Offset: 12, Msg: fmt.Sprintf("code %d where %s was expected", code, pduName(want))}
		}
		return pmErr(code)
	}
	return &FormatError{Peer: c.peer, PDU: pduName(p.typ), Offset: 4, Msg: "unexpected reply, " + pduName(want) + " expected"}
}

package pmcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/pcp-exporter/pcp-exporter/internal/sasl"
)

// Security is how a Source protects and authenticates its connection:
// the in-band TLS upgrade and SASL authentication of PCP's handshake
// (libpcp secureconnect.c). Unlike libpcp, which does not verify pmcd's
// certificate unless told to, TLS here verifies the certificate and the
// server name unless TLS.InsecureSkipVerify is set; and a pmcd that does
// not offer what is configured is an error, never a plaintext fallback.
type Security struct {
	// TLS upgrades the connection after CREDS (nil: no TLS). Its
	// ServerName defaults to the endpoint's host (for a unix socket: this
	// host's name, as libpcp); MinVersion is raised to TLS 1.2.
	TLS *tls.Config
	// SASL authenticates the client (nil: none).
	SASL *SASL
}

// SASL are the credentials for pmcd's SASL exchange.
type SASL struct {
	// Mechanism is PLAIN, LOGIN or SCRAM-SHA-256 ("": the strongest pmcd
	// offers). PLAIN and LOGIN are refused over TCP without TLS.
	Mechanism string
	User      string
	// Password is called at each connection (a file may have changed).
	Password func() (string, error)
	// nonce fixes SCRAM's client nonce (nil: random) for the tests that
	// replay a recorded exchange.
	nonce []byte
}

// Feature bits used only by the secure handshake (libpcp.h PDU_FLAG_*).
const featSecureAck = 0x0010

// Bounds of the authentication exchange: an ATTR value is less than
// 4096 bytes and a SASL payload less than 2048 (libpcp internal.h
// LIMIT_ATTR_PDU, LIMIT_AUTH_PDU); a mechanism needs at most 3 round trips,
// so a server still challenging after maxSASLSteps is hostile or broken.
const (
	maxAttrValue = 4096
	maxAuthValue = 2048
	maxSASLSteps = 8
	// pmErrNYI is the base under which libpcp shifts SASL errors
	// (secureconnect.c __pmSecureSocketsError).
	pmErrNYI = -21344
)

// secureFlags are the CREDS flags for the configured security (libpcp
// connect.c check_feature_flags), or an error when pmcd does not offer it.
func (c *conn) secureFlags() (uint32, error) {
	var f uint32
	sec := c.sec
	local := c.unix || isLoopback(c.c.RemoteAddr())
	if c.features&featCertReqd != 0 && !local {
		if sec == nil || sec.TLS == nil {
			return 0, fmt.Errorf("pmcd at %s requires a client certificate: configure TLS with a cert_file (%v)", c.peer, pmErr(-12408))
		}
		f |= featCertReqd
	}
	if sec == nil {
		return f, nil
	}
	if sec.TLS != nil {
		if c.features&featSecure == 0 {
			return 0, fmt.Errorf("pmcd at %s does not offer TLS (it has no certificate in its tls.conf): not connecting in plaintext", c.peer)
		}
		f |= featSecure | c.features&featSecureAck
	}
	if sec.SASL != nil {
		if c.features&featAuth == 0 {
			return 0, fmt.Errorf("pmcd at %s does not offer authentication (built without SASL)", c.peer)
		}
		f |= featAuth
	}
	return f, nil
}

// authConfigured says whether SASL credentials are configured.
func (c *conn) authConfigured() bool { return c.sec != nil && c.sec.SASL != nil }

// upgrade sends the CREDS PDU in c.w and runs what its flags ask for: the
// secure-ack, the TLS handshake on the same socket, the SASL exchange
// (libpcp secureconnect.c __pmSecureClientHandshake).
func (c *conn) upgrade(flags uint32, deadline time.Time) error {
	if _, err := c.c.Write(c.w.B); err != nil {
		return fmt.Errorf("pmcd at %s: %w", c.peer, err)
	}
	c.w.B = c.w.B[:0]
	if flags&featSecureAck != 0 {
		p, err := c.readSmall("the secure-ack")
		if err != nil {
			return err
		}
		if p.typ != pduError || len(p.b) != 16 {
			return &FormatError{Peer: c.peer, PDU: pduName(p.typ), Offset: 0, Msg: fmt.Sprintf("%d bytes where the 16-byte secure-ack ERROR was expected", len(p.b))}
		}
		if code, _ := errorCode(p, c.peer); code < 0 {
			return fmt.Errorf("pmcd at %s refused TLS: %v", c.peer, pmErr(code))
		}
	}
	encrypted := false
	if flags&featSecure != 0 {
		if c.r.Buffered() != 0 {
			return &FormatError{Peer: c.peer, PDU: "TLS", Offset: 0, Msg: fmt.Sprintf("%d plaintext bytes before the TLS handshake", c.r.Buffered())}
		}
		cfg := c.sec.TLS.Clone()
		if cfg.MinVersion < tls.VersionTLS12 {
			cfg.MinVersion = tls.VersionTLS12
		}
		if cfg.ServerName == "" {
			cfg.ServerName = c.serverName()
		}
		if cfg.GetClientCertificate == nil {
			// as crypto/tls chooses, noting that pmcd asked (it may end
			// the session on the first write when it gets none)
			certs := cfg.Certificates
			cfg.GetClientCertificate = func(cri *tls.CertificateRequestInfo) (*tls.Certificate, error) {
				c.certAsked = len(certs) == 0
				for i := range certs {
					if cri.SupportsCertificate(&certs[i]) == nil {
						return &certs[i], nil
					}
				}
				if len(certs) > 0 {
					return &certs[0], nil
				}
				return &tls.Certificate{}, nil
			}
		}
		tc := tls.Client(c.c, cfg)
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			return c.tlsError(err, cfg.ServerName)
		}
		c.c = recordConn{tc}
		c.r.Reset(tc)
		encrypted = true
	}
	if flags&featAuth != 0 {
		return c.authenticate(encrypted)
	}
	return nil
}

// serverName is the name pmcd's certificate must carry: the endpoint's
// host, or for a unix socket this host's name (libpcp's SNI).
func (c *conn) serverName() string {
	if c.unix {
		h, _ := os.Hostname()
		return h
	}
	h, _, err := net.SplitHostPort(strings.TrimPrefix(c.peer, "tcp:"))
	if err != nil {
		return c.peer
	}
	return h
}

// tlsError is one line saying why the TLS handshake failed.
func (c *conn) tlsError(err error, name string) error {
	var (
		ua   x509.UnknownAuthorityError
		he   x509.HostnameError
		ci   x509.CertificateInvalidError
		ve   *tls.CertificateVerificationError
		hint string
	)
	switch {
	case errors.As(err, &ua):
		hint = "pmcd's certificate is not signed by a trusted CA (set the auth's tls ca_file)"
	case errors.As(err, &he):
		hint = fmt.Sprintf("pmcd's certificate is not valid for the name %q (set the auth's tls server_name)", name)
	case errors.As(err, &ci) && ci.Reason == x509.Expired:
		hint = "pmcd's certificate has expired or is not valid yet"
	case errors.As(err, &ve):
		hint = "pmcd's certificate was not accepted"
	case isTimeout(err) || errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("pmcd at %s: no TLS handshake in time (%w)", c.peer, errTimeout)
	case strings.Contains(err.Error(), "remote error"):
		hint = "pmcd rejected the TLS handshake"
	default:
		hint = "TLS handshake failed"
	}
	return fmt.Errorf("pmcd at %s: %s: %v", c.peer, hint, err)
}

// readSmall reads one handshake PDU, bounded by the ATTR limit.
func (c *conn) readSmall(what string) (pdu, error) {
	p, buf, err := readPDU(c.r, c.rbuf, hdrSize+4+maxAttrValue, c.peer)
	c.rbuf = buf[:0]
	if err != nil {
		var fe *FormatError
		if errors.As(err, &fe) {
			return p, err
		}
		if isTimeout(err) {
			return p, fmt.Errorf("pmcd at %s: %s did not come in time (%w)", c.peer, what, errTimeout)
		}
		return p, c.peerErr(fmt.Errorf("waiting for %s: %w", what, err))
	}
	return p, nil
}

// peerErr names the peer and, when the connection is TLS and pmcd sent an
// alert, says that pmcd ended the TLS session (a missing or untrusted
// client certificate shows so under TLS 1.3, after the handshake).
func (c *conn) peerErr(err error) error {
	if _, ok := c.c.(recordConn); ok && strings.Contains(err.Error(), "remote error: tls:") {
		msg := strings.TrimPrefix(err.Error(), "pmcd at "+c.peer+": ")
		return fmt.Errorf("pmcd at %s ended the TLS session (client certificate missing or not trusted?): %s", c.peer, msg)
	}
	// pmcd asked for a client certificate, got none and closed: its alert
	// can be lost to the reset that meets our first write
	if _, ok := c.c.(recordConn); ok && c.certAsked && (errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, io.EOF)) {
		msg := strings.TrimPrefix(err.Error(), "pmcd at "+c.peer+": ")
		return fmt.Errorf("pmcd at %s ended the TLS session: it asked for a client certificate (certificate required) and the auth has none (set the auth's tls cert_file and key_file): %s", c.peer, msg)
	}
	if strings.HasPrefix(err.Error(), "pmcd at ") {
		return err
	}
	return fmt.Errorf("pmcd at %s: %w", c.peer, err)
}

// sendAttr sends an ATTR PDU (attr 0: a SASL payload), unpadded as
// libpcp's p_attr.c sends it.
func (c *conn) sendAttr(attr uint32, v []byte) error {
	if len(v) >= maxAuthValue {
		return fmt.Errorf("pmcd at %s: SASL message of %d bytes exceeds pmcd's limit of %d", c.peer, len(v), maxAuthValue-1)
	}
	w := &c.w
	w.Reset()
	w.Begin(pduAttr)
	w.U32(attr)
	w.Raw(v)
	w.Finish()
	b := w.B
	w.Reset()
	if _, err := c.c.Write(b); err != nil {
		return c.peerErr(err)
	}
	return nil
}

// readAuth reads a SASL payload (ATTR, attr 0); an ERROR is pmcd
// refusing the authentication.
func (c *conn) readAuth(what string) ([]byte, error) {
	p, err := c.readSmall(what)
	if err != nil {
		return nil, err
	}
	switch p.typ {
	case pduAttr:
		if len(p.b) < 16 {
			return nil, &FormatError{Peer: c.peer, PDU: "ATTR", Offset: 12, Msg: fmt.Sprintf("length %d, want at least 16", len(p.b))}
		}
		d := decoder(p)
		if a := d.U32(); a != 0 {
			return nil, &FormatError{Peer: c.peer, PDU: "ATTR", Offset: 12, Msg: fmt.Sprintf("attribute %d where a SASL payload (0) was expected", a)}
		}
		return p.b[16:], nil
	case pduError:
		code, err := errorCode(p, c.peer)
		if err != nil {
			return nil, err
		}
		return nil, c.authError(code)
	}
	return nil, &FormatError{Peer: c.peer, PDU: pduName(p.typ), Offset: 4, Msg: "unexpected PDU in the SASL exchange, ATTR expected"}
}

// authError is pmcd's refusal of the credentials as one line (the user
// name, never the password).
func (c *conn) authError(code int32) error {
	who := ""
	if c.authConfigured() {
		who = fmt.Sprintf(" as %q", c.sec.SASL.User)
		if c.mech != "" {
			who += " with " + c.mech
		}
	}
	return fmt.Errorf("pmcd at %s: authentication%s failed: %s", c.peer, who, saslErrText(code))
}

// saslErrText is pmErrStr's text for a SASL error libpcp shifted below
// PM_ERR_NYI (err.c), else the PCP error's.
func saslErrText(code int32) string {
	if code > pmErrNYI-1000 && code < pmErrNYI {
		texts := map[int32]string{ // sasl_errstring of Cyrus SASL 2.1.28
			-1: "generic failure", -4: "no mechanism available", -13: "authentication failure",
			-14: "authorization failure", -15: "mechanism too weak for this user",
			-16: "encryption needed to use mechanism", -20: "user not found",
		}
		s := code - pmErrNYI
		if t, ok := texts[s]; ok {
			return "Authentication - " + t
		}
		return fmt.Sprintf("Authentication - SASL error %d", s)
	}
	return pmErr(code).Error()
}

// authenticate runs the SASL exchange over ATTR PDUs (libpcp
// __pmAuthClientNegotiation): pmcd's mechanism list, the chosen mechanism
// with its initial response, then challenges and responses.
func (c *conn) authenticate(encrypted bool) error {
	a := c.sec.SASL
	list, err := c.readAuth("the SASL mechanism list")
	if err != nil {
		return err
	}
	name, err := sasl.Choose(string(list), a.Mechanism, encrypted || c.unix)
	if err != nil {
		return fmt.Errorf("pmcd at %s: %v", c.peer, err)
	}
	c.mech = name
	pw := ""
	if a.Password != nil {
		if pw, err = a.Password(); err != nil {
			return fmt.Errorf("pmcd at %s: password of %q: %v", c.peer, a.User, err)
		}
	}
	m, err := sasl.NewNonce(name, a.User, pw, a.nonce)
	if err != nil {
		return fmt.Errorf("pmcd at %s: %v", c.peer, err)
	}
	init, err := m.Start()
	if err != nil {
		return fmt.Errorf("pmcd at %s: %v", c.peer, err)
	}
	msg := append(append([]byte(name), 0), init...)
	if err := c.sendAttr(0, msg); err != nil {
		return err
	}
	for step := 0; !m.Done(); step++ {
		if step == maxSASLSteps {
			return fmt.Errorf("pmcd at %s: the %s exchange did not end after %d challenges", c.peer, name, maxSASLSteps)
		}
		ch, err := c.readAuth("a SASL challenge")
		if err != nil {
			return err
		}
		resp, _, err := m.Next(ch)
		if err != nil {
			return fmt.Errorf("pmcd at %s: %v", c.peer, err)
		}
		if err := c.sendAttr(0, resp); err != nil {
			return err
		}
	}
	return nil
}

// recordConn writes each PDU in TLS records of its own. pmcd (6.0.3) waits
// for its socket to be readable before reading a PDU, so a second PDU
// decrypted with the first from the same record would sit in OpenSSL's
// buffer unseen until more bytes arrive: pipelined requests would stall.
type recordConn struct{ *tls.Conn }

func (r recordConn) Write(b []byte) (int, error) {
	done := 0
	for len(b) >= hdrSize {
		n := int(binary.BigEndian.Uint32(b))
		if n < hdrSize || n > len(b) {
			break
		}
		m, err := r.Conn.Write(b[:n])
		done += m
		if err != nil {
			return done, err
		}
		b = b[n:]
	}
	if len(b) == 0 {
		return done, nil
	}
	m, err := r.Conn.Write(b)
	return done + m, err
}

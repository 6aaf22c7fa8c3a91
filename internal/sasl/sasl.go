// Package sasl is the client side of the SASL mechanisms pmcd offers with
// its default configuration (/etc/sasl2/pmcd.conf: plain login
// scram-sha-256): PLAIN (RFC 4616), LOGIN (draft-murchison-sasl-login)
// and SCRAM-SHA-256 (RFC 5802, RFC 7677, without channel binding, as libpcp
// uses it). It knows nothing of PCP's framing: a Mechanism turns each
// server challenge into the next client response.
package sasl

import (
	"errors"
	"fmt"
	"strings"
)

// Mechanism is one client authentication exchange.
type Mechanism interface {
	// Name is the mechanism's registered name (upper case).
	Name() string
	// Start is the initial response (nil: none).
	Start() ([]byte, error)
	// Next answers a server challenge. done is true when the client side
	// of the exchange is complete once resp is sent.
	Next(challenge []byte) (resp []byte, done bool, err error)
	// Done is true when the exchange needs no further challenge (PLAIN
	// after its initial response).
	Done() bool
}

// Names lists the supported mechanisms, strongest first.
var Names = []string{"SCRAM-SHA-256", "PLAIN", "LOGIN"}

// ErrSecret is returned when a secret-bearing mechanism is chosen over a
// channel that is neither encrypted nor local.
var ErrSecret = errors.New("sends the password in clear: use TLS, the unix socket, or SCRAM-SHA-256")

// New returns the client of mechanism name (case-insensitive) for user
// and password.
func New(name, user, password string) (Mechanism, error) {
	switch strings.ToUpper(name) {
	case "PLAIN":
		return &plain{user: user, pass: password}, nil
	case "LOGIN":
		return &login{user: user, pass: password}, nil
	case "SCRAM-SHA-256":
		return newSCRAM(user, password, nil)
	}
	return nil, unsupported(name)
}

// NewNonce is New with SCRAM-SHA-256's client nonce given (nil: random),
// so that a recorded server exchange replays (the handshake's fuzz seeds);
// the other mechanisms have no nonce.
func NewNonce(name, user, password string, nonce []byte) (Mechanism, error) {
	if strings.ToUpper(name) == "SCRAM-SHA-256" {
		return newSCRAM(user, password, nonce)
	}
	return New(name, user, password)
}

func unsupported(name string) error {
	return fmt.Errorf("SASL mechanism %q is not supported (supported: %s)", name, strings.Join(Names, ", "))
}

// Clear reports whether mechanism name sends the password itself.
func Clear(name string) bool {
	n := strings.ToUpper(name)
	return n == "PLAIN" || n == "LOGIN"
}

// Choose picks the mechanism to use from the server's space-separated
// list: want when set (it must be offered), else the strongest offered
// that the channel allows (clear-text ones only when clearOK).
func Choose(offered, want string, clearOK bool) (string, error) {
	// compared ASCII-case-insensitively, quoted as sent (strings.ToUpper
	// would turn bytes that are not UTF-8 into U+FFFD)
	list := strings.Fields(offered)
	has := func(n string) bool {
		for _, m := range list {
			if strings.EqualFold(m, n) {
				return true
			}
		}
		return false
	}
	if want != "" {
		w := strings.ToUpper(want)
		if !has(w) {
			return "", fmt.Errorf("SASL mechanism %s is not offered (offered: %s)", w, quoteList(list))
		}
		if Clear(w) && !clearOK {
			return "", fmt.Errorf("SASL mechanism %s %w", w, ErrSecret)
		}
		return w, nil
	}
	for _, n := range Names {
		if has(n) && (clearOK || !Clear(n)) {
			return n, nil
		}
	}
	return "", fmt.Errorf("no usable SASL mechanism offered (offered: %s; usable: %s)", quoteList(list), strings.Join(Names, ", "))
}

func quoteList(l []string) string {
	if len(l) > 8 {
		l = append(l[:8:8], "...")
	}
	return fmt.Sprintf("%q", strings.Join(l, " "))
}

type plain struct {
	user, pass string
}

func (p *plain) Name() string { return "PLAIN" }
func (p *plain) Done() bool   { return true }

// Start is "\0user\0password": no authorization identity, as RFC 4616
// allows (pmcd then authorizes the authenticated user).
func (p *plain) Start() ([]byte, error) {
	b := make([]byte, 0, 2+len(p.user)+len(p.pass))
	b = append(b, 0)
	b = append(b, p.user...)
	b = append(b, 0)
	return append(b, p.pass...), nil
}

func (p *plain) Next([]byte) ([]byte, bool, error) {
	return nil, false, errors.New("PLAIN: unexpected challenge after the initial response")
}

// login answers the server's two prompts ("Username:", "Password:") with
// the user name and the password, as Cyrus SASL's client does (it does not
// read the prompts).
type login struct {
	user, pass string
	step       int
}

func (l *login) Name() string           { return "LOGIN" }
func (l *login) Done() bool             { return l.step >= 2 }
func (l *login) Start() ([]byte, error) { return nil, nil }

func (l *login) Next([]byte) ([]byte, bool, error) {
	l.step++
	switch l.step {
	case 1:
		return []byte(l.user), false, nil
	case 2:
		return []byte(l.pass), true, nil
	}
	return nil, false, errors.New("LOGIN: a third challenge after the password")
}

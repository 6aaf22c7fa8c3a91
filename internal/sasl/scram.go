package sasl

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Iteration bounds accepted from a server: RFC 7677 asks for at least
// 4096 (a lower count offered by a man in the middle would make the proof
// cheap to attack offline), and a count above MaxIterations would let a
// hostile server make the client spin (1<<20 PBKDF2-SHA-256 rounds take
// about half a second).
const (
	MinIterations = 4096
	MaxIterations = 1 << 20
)

// scram is SCRAM-SHA-256 without channel binding (GS2 header "n,,").
type scram struct {
	user, pass string
	nonce      string
	step       int
	firstBare  string
	serverSig  []byte
}

func newSCRAM(user, pass string, nonce []byte) (*scram, error) {
	if nonce == nil {
		nonce = make([]byte, 24)
		rand.Read(nonce)
	}
	return &scram{user: user, pass: pass, nonce: base64.RawStdEncoding.EncodeToString(nonce)}, nil
}

func (s *scram) Name() string { return "SCRAM-SHA-256" }
func (s *scram) Done() bool   { return s.step >= 2 }

var scramEscaper = strings.NewReplacer("=", "=3D", ",", "=2C")

// Start is the client-first message.
func (s *scram) Start() ([]byte, error) {
	if s.user == "" {
		return nil, errors.New("SCRAM-SHA-256: empty user name")
	}
	s.firstBare = "n=" + scramEscaper.Replace(s.user) + ",r=" + s.nonce
	return []byte("n,," + s.firstBare), nil
}

// Next answers the server-first message with the client-final one, then
// checks the server's signature in the server-final message.
func (s *scram) Next(ch []byte) ([]byte, bool, error) {
	switch s.step {
	case 0:
		s.step++
		return s.final(string(ch))
	case 1:
		s.step++
		msg := string(ch)
		if e, ok := strings.CutPrefix(msg, "e="); ok {
			return nil, false, fmt.Errorf("SCRAM-SHA-256: the server refused: %q", clip(e))
		}
		v, ok := strings.CutPrefix(msg, "v=")
		if !ok {
			return nil, false, fmt.Errorf("SCRAM-SHA-256: server-final message %q has no v=", clip(msg))
		}
		if i := strings.IndexByte(v, ','); i >= 0 {
			v = v[:i]
		}
		sig, err := base64.StdEncoding.DecodeString(v)
		if err != nil || subtle.ConstantTimeCompare(sig, s.serverSig) != 1 {
			return nil, false, errors.New("SCRAM-SHA-256: the server's signature is wrong (it does not know the password: an impostor?)")
		}
		return []byte{}, true, nil
	}
	return nil, false, errors.New("SCRAM-SHA-256: a challenge after the server-final message")
}

func (s *scram) final(first string) ([]byte, bool, error) {
	var nonce, salt64, iter string
	for i, attr := range strings.Split(first, ",") {
		k, v, ok := strings.Cut(attr, "=")
		if !ok || len(k) != 1 {
			return nil, false, fmt.Errorf("SCRAM-SHA-256: server-first message %q: attribute %d is not K=V", clip(first), i+1)
		}
		switch {
		case i == 0 && k == "m":
			return nil, false, errors.New("SCRAM-SHA-256: the server requires an extension (m=), which is not supported")
		case i == 0 && k == "r":
			nonce = v
		case i == 1 && k == "s":
			salt64 = v
		case i == 2 && k == "i":
			iter = v
		case i < 3:
			return nil, false, fmt.Errorf("SCRAM-SHA-256: server-first message %q: attribute %d is %q, want r, s, i in order", clip(first), i+1, k)
		}
	}
	if !strings.HasPrefix(nonce, s.nonce) || len(nonce) == len(s.nonce) {
		return nil, false, fmt.Errorf("SCRAM-SHA-256: server nonce %q does not extend the client's", clip(nonce))
	}
	// RFC 5802: the nonce is printable ASCII other than ','
	if strings.IndexFunc(nonce, func(r rune) bool { return r < 0x21 || r > 0x7e || r == ',' }) >= 0 {
		return nil, false, fmt.Errorf("SCRAM-SHA-256: server nonce %q has forbidden characters", clip(nonce))
	}
	salt, err := base64.StdEncoding.DecodeString(salt64)
	if err != nil || len(salt) == 0 {
		return nil, false, fmt.Errorf("SCRAM-SHA-256: bad salt %q", clip(salt64))
	}
	n, err := strconv.Atoi(iter)
	if err != nil || n < MinIterations || n > MaxIterations {
		return nil, false, fmt.Errorf("SCRAM-SHA-256: iteration count %q outside [%d, %d]", clip(iter), MinIterations, MaxIterations)
	}
	salted, err := pbkdf2.Key(sha256.New, s.pass, salt, n, sha256.Size)
	if err != nil {
		return nil, false, fmt.Errorf("SCRAM-SHA-256: %v", err)
	}
	clientKey := mac(salted, "Client Key")
	stored := sha256.Sum256(clientKey)
	withoutProof := "c=biws,r=" + nonce // biws = base64("n,,")
	auth := s.firstBare + "," + first + "," + withoutProof
	proof := mac(stored[:], auth)
	for i := range proof {
		proof[i] ^= clientKey[i]
	}
	s.serverSig = mac(mac(salted, "Server Key"), auth)
	return []byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof)), false, nil
}

func mac(key []byte, msg string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(msg))
	return h.Sum(nil)
}

// clip bounds untrusted text quoted in an error.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

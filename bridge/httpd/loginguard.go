package httpd

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/time/rate"
)

// LoginGuard bounds what failed basic-auth logins cost. The toolkit checks
// every password it has not cached with bcrypt (tens of milliseconds of
// CPU, one at a time): clients sending random passwords kept a core busy
// and made the authorised scrapes wait. The guard, in front of the toolkit:
//   - remembers the verdicts of recent credentials (accepted or refused)
//     under an HMAC of the user and password with a key drawn at start
//     (neither is stored), forgotten when the web config file changes: a
//     credential seen before is answered without bcrypt (refused ones) or
//     passed on (accepted ones, whose check the toolkit has cached);
//   - lets each client (remote IP) have at most PerClient new credentials
//     verified per second (burst Burst), and all clients at most twice
//     that: a client past its share waits a second and gets 429 with
//     Retry-After, without a verification.
//
// Authorised clients are thus never queued behind a flood once their
// credentials were accepted; a client whose first login comes during a
// flood from its own address may get 429 until a verification is free.
type LoginGuard struct {
	// WebConfigFile is the toolkit's --web.config.file ("" for none): its
	// changes forget every verdict.
	WebConfigFile string
	// PerClient is the verifications per second per client (default 1);
	// Burst how many may come at once (default 3).
	PerClient float64
	Burst     int
	// Tarpit is how long a refused-unverified request waits (default 1 s).
	Tarpit time.Duration

	mac     []byte
	global  *rate.Limiter
	mu      sync.Mutex
	stamp   fileStamp
	stampAt time.Time
	verdict map[[sha256.Size]byte]verdict
	clients map[string]*rate.Limiter
}

type verdict uint8

const (
	verdictUnknown verdict = iota
	verdictGood
	verdictBad
)

// maxVerdicts and maxClients bound the guard's memory.
const (
	maxVerdicts = 1024
	maxClients  = 4096
)

type fileStamp struct {
	dev, ino, size uint64
	mtime          int64
	err            bool
}

func (g *LoginGuard) init() {
	if g.PerClient <= 0 {
		g.PerClient = 1
	}
	if g.Burst <= 0 {
		g.Burst = 3
	}
	if g.Tarpit <= 0 {
		g.Tarpit = time.Second
	}
	g.mac = make([]byte, 32)
	if _, err := rand.Read(g.mac); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	g.global = rate.NewLimiter(rate.Limit(2*g.PerClient), 2*g.Burst)
	g.verdict = map[[sha256.Size]byte]verdict{}
	g.clients = map[string]*rate.Limiter{}
}

// key is the HMAC of the credentials: what the guard keeps of them.
func (g *LoginGuard) key(user, pass string) [sha256.Size]byte {
	h := hmac.New(sha256.New, g.mac)
	h.Write([]byte(user))
	h.Write([]byte{0})
	h.Write([]byte(pass))
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}

// known returns the verdict remembered for key, after forgetting every
// verdict if the web config file changed.
func (g *LoginGuard) known(k [sha256.Size]byte) verdict {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.checkConfig()
	return g.verdict[k]
}

// checkConfig forgets the verdicts when the web config file's identity,
// size or mtime changed (at most one stat per 100 ms: the toolkit itself
// reads the file at every request).
func (g *LoginGuard) checkConfig() {
	if g.WebConfigFile == "" {
		return
	}
	now := time.Now()
	if now.Sub(g.stampAt) < 100*time.Millisecond {
		return
	}
	g.stampAt = now
	var st unix.Stat_t
	var s fileStamp
	if err := unix.Stat(g.WebConfigFile, &st); err != nil {
		s.err = true
	} else {
		s = fileStamp{dev: uint64(st.Dev), ino: uint64(st.Ino), size: uint64(st.Size), mtime: st.Mtim.Nano()}
	}
	if s != g.stamp {
		g.stamp = s
		clear(g.verdict)
	}
}

// remember records a verdict (the oldest are not kept: at the bound, all
// are forgotten, which costs one verification per credential in use).
func (g *LoginGuard) remember(k [sha256.Size]byte, v verdict) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.verdict) >= maxVerdicts {
		clear(g.verdict)
	}
	g.verdict[k] = v
}

// allow takes a verification from the client's share and the global one.
func (g *LoginGuard) allow(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	g.mu.Lock()
	l := g.clients[host]
	if l == nil {
		if len(g.clients) >= maxClients {
			for h, o := range g.clients {
				if o.Tokens() >= float64(g.Burst) { // idle: full again
					delete(g.clients, h)
				}
			}
			if len(g.clients) >= maxClients {
				g.mu.Unlock()
				return false
			}
		}
		l = rate.NewLimiter(rate.Limit(g.PerClient), g.Burst)
		g.clients[host] = l
	}
	g.mu.Unlock()
	return l.Allow() && g.global.Allow()
}

// tarpit holds a refused request, so that a client looping on refusals
// sends a request per Tarpit instead of as many as the server answers.
func (g *LoginGuard) tarpit(ctx context.Context) {
	t := time.NewTimer(g.Tarpit)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

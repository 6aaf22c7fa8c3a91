package httpd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/mdlayher/vsock"
	"github.com/prometheus/exporter-toolkit/web"
)

// Config are the limits of the HTTP server, named as Prometheus names its
// own (--web.read-timeout, --web.max-connections) and VictoriaMetrics its
// idle timeout (-http.idleConnTimeout).
type Config struct {
	// ReadTimeout is the longest a request (headers and body) may take
	// to read; 0 is no limit.
	ReadTimeout time.Duration
	// WriteTimeout is the longest from the end of a request's headers to
	// the end of its response; 0 is no limit.
	WriteTimeout time.Duration
	// IdleTimeout is how long an idle keep-alive connection stays open;
	// 0 is the read timeout.
	IdleTimeout time.Duration
	// MaxConns is the most connections open at once across all
	// listeners; 0 is no limit.
	MaxConns int
	// HealthTimeout is how long the sources may not answer (or a scrape
	// run past WriteTimeout) before the Watchdog fails liveness.
	HealthTimeout time.Duration
}

// Server returns the HTTP server of handler with the configured timeouts
// and connection limit.
func (c *Config) Server(handler http.Handler) *http.Server {
	s := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: min(10*time.Second, nonZero(c.ReadTimeout, 10*time.Second)),
		ReadTimeout:       c.ReadTimeout,
		WriteTimeout:      c.WriteTimeout,
		IdleTimeout:       c.IdleTimeout,
	}
	if c.MaxConns > 0 {
		s.ConnState = newConnLimit(c.MaxConns).track
	}
	return s
}

// connLimit keeps at most max connections open. Queueing the others in
// the listen backlog (a limiting listener) would let idle clients keep a
// health check waiting for minutes; instead a connection beyond the limit
// closes the one that has waited longest without a request in progress
// (new or idle keep-alive), or itself when every one is busy.
type connLimit struct {
	max   int
	mu    sync.Mutex
	conns map[net.Conn]connInfo
}

type connInfo struct {
	busy  bool
	since time.Time
}

func newConnLimit(max int) *connLimit {
	return &connLimit{max: max, conns: make(map[net.Conn]connInfo, max)}
}

// track is the server's ConnState hook; the server calls it for a new
// connection before serving it.
func (l *connLimit) track(c net.Conn, st http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch st {
	case http.StateNew:
		if len(l.conns) >= l.max {
			var victim net.Conn
			var oldest time.Time
			for o, in := range l.conns {
				if !in.busy && (victim == nil || in.since.Before(oldest)) {
					victim, oldest = o, in.since
				}
			}
			if victim == nil {
				victim = c
			}
			victim.Close()
			delete(l.conns, victim)
			if victim == c {
				return
			}
		}
		l.conns[c] = connInfo{since: time.Now()}
	case http.StateActive:
		if _, ok := l.conns[c]; ok {
			l.conns[c] = connInfo{busy: true}
		}
	case http.StateIdle:
		if _, ok := l.conns[c]; ok {
			l.conns[c] = connInfo{since: time.Now()}
		}
	case http.StateClosed, http.StateHijacked:
		delete(l.conns, c)
	}
}

func nonZero(d, dflt time.Duration) time.Duration {
	if d == 0 {
		return dflt
	}
	return d
}

// ErrNoListenAddress is Listen's error when the toolkit's flags name no
// address and no systemd socket.
var ErrNoListenAddress = errors.New("--web.listen-address: none given")

// Listen opens the listeners of the toolkit's flags (addresses, vsock://
// addresses or systemd's sockets, as web.ListenAndServe does).
func Listen(wf *web.FlagConfig, logger *slog.Logger) ([]net.Listener, error) {
	var ls []net.Listener
	if wf.WebSystemdSocket != nil && *wf.WebSystemdSocket {
		logger.Info("Listening on systemd activated listeners instead of port listeners.")
		sl, err := activation.Listeners()
		if err != nil {
			return nil, err
		}
		if len(sl) == 0 {
			return nil, errors.New("no socket activation file descriptors found")
		}
		ls = sl
	} else {
		if wf.WebListenAddresses == nil || len(*wf.WebListenAddresses) == 0 {
			return nil, ErrNoListenAddress
		}
		for _, addr := range *wf.WebListenAddresses {
			l, err := listenOne(addr)
			if err != nil {
				for _, o := range ls {
					o.Close()
				}
				return nil, fmt.Errorf("--web.listen-address=%q: %w", addr, err)
			}
			ls = append(ls, l)
		}
	}
	return ls, nil
}

func listenOne(addr string) (net.Listener, error) {
	rest, ok := strings.CutPrefix(addr, "vsock://")
	if !ok {
		return net.Listen("tcp", addr)
	}
	_, port, err := net.SplitHostPort(rest)
	if err != nil {
		return nil, err
	}
	var p uint32
	if _, err := fmt.Sscan(port, &p); err != nil {
		return nil, fmt.Errorf("vsock port %q: %w", port, err)
	}
	return vsock.Listen(p, nil)
}

// Serve serves server on the listeners with the toolkit's TLS and basic
// authentication until ctx ends, then shuts it down (waiting at most 5
// seconds for the requests in progress).
func Serve(ctx context.Context, listeners []net.Listener, server *http.Server, wf *web.FlagConfig, logger *slog.Logger) error {
	errc := make(chan error, 1)
	go func() { errc <- web.ServeMultiple(listeners, server, wf, logger) }()
	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	case <-ctx.Done():
		logger.Info("shutting down")
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return server.Shutdown(sctx)
	}
}

// LogFailedLogins guards server's basic authentication (see LoginGuard)
// and logs refused credentials (a 401 answer to a request that sent some,
// or a 429 of the guard), at most one line per interval with the count
// since the last one. The toolkit answers them itself, in the handler it
// puts around server.Handler when it starts serving (web.Serve), before
// any handler of ours: the listener's first Accept, which the serving
// goroutine calls after that, puts the guard around the toolkit's handler.
// With several listeners the toolkit's goroutines each wrap the handler
// at once, so logins are guarded and logged for one listener only.
func LogFailedLogins(server *http.Server, ls []net.Listener, logger *slog.Logger, interval time.Duration, guard *LoginGuard) []net.Listener {
	if len(ls) != 1 {
		return ls
	}
	if guard == nil {
		guard = &LoginGuard{}
	}
	guard.init()
	fl := &failedLogins{logger: logger, interval: interval, guard: guard}
	return []net.Listener{&hookListener{Listener: ls[0], hook: func() {
		fl.next = server.Handler
		server.Handler = fl
	}}}
}

type hookListener struct {
	net.Listener
	once sync.Once
	hook func()
}

func (l *hookListener) Accept() (net.Conn, error) {
	l.once.Do(l.hook)
	return l.Listener.Accept()
}

// failedLogins guards the logins of next and logs the requests it
// refuses although they carried credentials.
type failedLogins struct {
	next     http.Handler
	logger   *slog.Logger
	interval time.Duration
	guard    *LoginGuard

	mu      sync.Mutex
	last    time.Time
	missed  int
	limited int
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (fl *failedLogins) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	user, pass, hasAuth := r.BasicAuth()
	if !hasAuth {
		fl.next.ServeHTTP(w, r)
		return
	}
	g := fl.guard
	key := g.key(user, pass)
	switch g.known(key) {
	case verdictGood:
		fl.next.ServeHTTP(w, r)
		return
	case verdictBad:
		w.Header().Set("WWW-Authenticate", "Basic")
		http.Error(w, http.StatusText(http.StatusUnauthorized), http.StatusUnauthorized)
		fl.failed(user, r, false)
		return
	}
	if !g.allow(r.RemoteAddr) {
		g.tarpit(r.Context())
		w.Header().Set("Retry-After", "1")
		http.Error(w, "too many logins to verify: retry later", http.StatusTooManyRequests)
		fl.failed(user, r, true)
		return
	}
	sw := &statusWriter{ResponseWriter: w}
	fl.next.ServeHTTP(sw, r)
	switch {
	case sw.code == http.StatusUnauthorized:
		g.remember(key, verdictBad)
		fl.failed(user, r, false)
	case sw.code != http.StatusTooManyRequests && sw.code < 500:
		g.remember(key, verdictGood)
	}
}

// failed logs a refused login, at most one line per interval.
func (fl *failedLogins) failed(user string, r *http.Request, limited bool) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if limited {
		fl.limited++
	}
	if now := time.Now(); now.Sub(fl.last) >= fl.interval {
		fl.logger.Warn("failed login", "user", user, "remote", r.RemoteAddr, "path", r.URL.Path, "failed_since_last_line", fl.missed+1, "refused_unverified_since_last_line", fl.limited)
		fl.last, fl.missed, fl.limited = now, 0, 0
		return
	}
	fl.missed++
}

// GetOnly answers 405 to methods other than GET and HEAD (OPTIONS lists
// them), as Prometheus's own read-only endpoints do.
func GetOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			h.ServeHTTP(w, r)
			return
		case http.MethodOptions:
			w.Header().Set("Allow", "GET, HEAD, OPTIONS")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Allow", "GET, HEAD, OPTIONS")
		http.Error(w, fmt.Sprintf("method %s not allowed: this endpoint answers GET and HEAD", r.Method), http.StatusMethodNotAllowed)
	})
}

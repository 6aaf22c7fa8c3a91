package main

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

	"github.com/alecthomas/kingpin/v2"
	"github.com/coreos/go-systemd/v22/activation"
	"github.com/mdlayher/vsock"
	"github.com/prometheus/exporter-toolkit/web"
)

// httpFlags are the limits of serve's HTTP server, named as Prometheus
// names its own (--web.read-timeout, --web.max-connections) and
// VictoriaMetrics its idle timeout (-http.idleConnTimeout).
type httpFlags struct {
	readTimeout   time.Duration
	writeTimeout  time.Duration
	idleTimeout   time.Duration
	maxConns      int
	healthTimeout time.Duration
}

func addHTTPFlags(cmd *kingpin.CmdClause) *httpFlags {
	f := &httpFlags{}
	cmd.Flag("web.read-timeout", "Maximum time to read a request, headers and body (0: no limit).").Default("30s").DurationVar(&f.readTimeout)
	cmd.Flag("web.write-timeout", "Maximum time from the end of a request's headers to the end of its response: a client that does not read a scrape is cut off then (0: no limit; keep it above the slowest scrape).").Default("2m").DurationVar(&f.writeTimeout)
	cmd.Flag("web.idle-timeout", "Time an idle keep-alive connection stays open (0: the read timeout).").Default("1m").DurationVar(&f.idleTimeout)
	cmd.Flag("web.max-connections", "Maximum number of simultaneous connections across all listeners: a connection beyond it closes the one idle longest (or itself when none is idle), so idle clients cannot keep others out (0: no limit).").Default("512").IntVar(&f.maxConns)
	cmd.Flag("web.health-timeout", "/-/healthy fails (and Kubernetes restarts the pod) when a read of the sources cannot take their locks within this time, or a scrape has run this long past --web.write-timeout.").Default("30s").DurationVar(&f.healthTimeout)
	return f
}

// check rejects negative limits, naming the flag and the value.
func (f *httpFlags) check() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"web.read-timeout", f.readTimeout}, {"web.write-timeout", f.writeTimeout}, {"web.idle-timeout", f.idleTimeout}} {
		if d.v < 0 {
			return usagef("--%s=%v: want a duration of 0 or more", d.name, d.v)
		}
	}
	if f.maxConns < 0 {
		return usagef("--web.max-connections=%d: want 0 (no limit) or more", f.maxConns)
	}
	if f.healthTimeout <= 0 {
		return usagef("--web.health-timeout=%v: want a positive duration", f.healthTimeout)
	}
	return nil
}

// server returns the HTTP server of handler with the configured timeouts
// and connection limit.
func (f *httpFlags) server(handler http.Handler) *http.Server {
	s := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: min(10*time.Second, nonZero(f.readTimeout, 10*time.Second)),
		ReadTimeout:       f.readTimeout,
		WriteTimeout:      f.writeTimeout,
		IdleTimeout:       f.idleTimeout,
	}
	if f.maxConns > 0 {
		s.ConnState = newConnLimit(f.maxConns).track
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

// listen opens the listeners of the toolkit's flags (addresses, vsock://
// addresses or systemd's sockets, as web.ListenAndServe does).
func (f *httpFlags) listen(wf *web.FlagConfig, logger *slog.Logger) ([]net.Listener, error) {
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
			return nil, usagef("--web.listen-address: none given")
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

// logFailedLogins makes server log refused credentials (a 401 answer to a
// request that sent some), at most one line per interval with the count
// since the last one. The toolkit answers them itself, in the handler it
// puts around server.Handler when it starts serving (web.Serve), before
// any handler of ours: the listener's first Accept, which the serving
// goroutine calls after that, puts this log around the toolkit's handler.
// With several listeners the toolkit's goroutines each wrap the handler
// at once, so failed logins are logged for one listener only.
func logFailedLogins(server *http.Server, ls []net.Listener, logger *slog.Logger, interval time.Duration) []net.Listener {
	if len(ls) != 1 {
		return ls
	}
	fl := &failedLogins{logger: logger, interval: interval}
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

// failedLogins logs the requests that next refuses with 401 although they
// carried credentials.
type failedLogins struct {
	next     http.Handler
	logger   *slog.Logger
	interval time.Duration

	mu     sync.Mutex
	last   time.Time
	missed int
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
	user, _, hasAuth := r.BasicAuth()
	if !hasAuth {
		fl.next.ServeHTTP(w, r)
		return
	}
	sw := &statusWriter{ResponseWriter: w}
	fl.next.ServeHTTP(sw, r)
	if sw.code != http.StatusUnauthorized {
		return
	}
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if now := time.Now(); now.Sub(fl.last) >= fl.interval {
		fl.logger.Warn("failed login", "user", user, "remote", r.RemoteAddr, "path", r.URL.Path, "failed_since_last_line", fl.missed+1)
		fl.last, fl.missed = now, 0
		return
	}
	fl.missed++
}

// getOnly answers 405 to methods other than GET and HEAD (OPTIONS lists
// them), as Prometheus's own read-only endpoints do.
func getOnly(h http.Handler) http.Handler {
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

// watchdog decides liveness: the exporter is wedged when a probe of the
// sources (their status, which takes an MMV directory's lock) has not
// returned within the timeout, or when a scrape has run longer than the
// write timeout (which ends scrapes blocked on a client that does not
// read) plus the timeout. At most one probe is outstanding: a wedged
// source holds one goroutine, not one per health check.
type watchdog struct {
	timeout      time.Duration
	writeTimeout time.Duration
	probe        func()
	now          func() time.Time

	mu         sync.Mutex
	probing    time.Time // start of the outstanding probe; zero when none
	probeDone  chan struct{}
	scrapes    map[uint64]time.Time
	nextScrape uint64
}

func newWatchdog(timeout, writeTimeout time.Duration, probe func()) *watchdog {
	return &watchdog{timeout: timeout, writeTimeout: writeTimeout, probe: probe, now: time.Now, scrapes: map[uint64]time.Time{}}
}

// track wraps the scrape handler: each request's start is kept while it runs.
func (wd *watchdog) track(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wd.mu.Lock()
		id := wd.nextScrape
		wd.nextScrape++
		wd.scrapes[id] = wd.now()
		wd.mu.Unlock()
		defer func() {
			wd.mu.Lock()
			delete(wd.scrapes, id)
			wd.mu.Unlock()
		}()
		h.ServeHTTP(w, r)
	})
}

// check returns why the exporter is wedged, "" when it is not. It waits
// for a probe at most wait.
func (wd *watchdog) check(ctx context.Context, wait time.Duration) string {
	wd.mu.Lock()
	now := wd.now()
	if wd.probing.IsZero() {
		wd.probing = now
		done := make(chan struct{})
		wd.probeDone = done
		go func() {
			wd.probe()
			wd.mu.Lock()
			wd.probing = time.Time{}
			wd.mu.Unlock()
			close(done)
		}()
	}
	done, started := wd.probeDone, wd.probing
	limit := wd.timeout
	if wd.writeTimeout > 0 {
		limit += wd.writeTimeout
	}
	var oldest time.Time
	for _, t := range wd.scrapes {
		if oldest.IsZero() || t.Before(oldest) {
			oldest = t
		}
	}
	wd.mu.Unlock()
	if wd.writeTimeout > 0 && !oldest.IsZero() && now.Sub(oldest) > limit {
		return fmt.Sprintf("a scrape has been running for %v (--web.write-timeout %v + --web.health-timeout %v)", now.Sub(oldest).Round(time.Millisecond), wd.writeTimeout, wd.timeout)
	}
	t := time.NewTimer(min(wait, max(0, wd.timeout-now.Sub(started))))
	defer t.Stop()
	select {
	case <-done:
		return ""
	case <-ctx.Done():
	case <-t.C:
	}
	if age := wd.now().Sub(started); age >= wd.timeout {
		return fmt.Sprintf("the sources have not answered for %v (--web.health-timeout %v): a read is stuck holding their lock", age.Round(time.Millisecond), wd.timeout)
	}
	return ""
}

// healthy answers /-/healthy from the watchdog, logging each change.
func (wd *watchdog) healthy(logger *slog.Logger) http.HandlerFunc {
	var mu sync.Mutex
	last := ""
	return func(w http.ResponseWriter, r *http.Request) {
		why := wd.check(r.Context(), 500*time.Millisecond)
		mu.Lock()
		if why != last {
			if why != "" {
				logger.Error("exporter wedged: /-/healthy fails", "reason", why)
			} else {
				logger.Info("exporter healthy again")
			}
			last = why
		}
		mu.Unlock()
		if why != "" {
			http.Error(w, "Unhealthy: "+why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "Healthy")
	}
}

// readiness answers /-/ready: ready once every source has been read
// successfully. Before that a request may start a read, at most one at a
// time and one a second, so that unauthenticated or frequent probes cost
// no more than one scrape a second.
type readiness struct {
	ready <-chan struct{}
	read  func()
	every time.Duration

	mu   sync.Mutex
	last time.Time
}

func (rd *readiness) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	select {
	case <-rd.ready:
		fmt.Fprintln(w, "Ready")
		return
	default:
	}
	if rd.mu.TryLock() {
		if time.Since(rd.last) >= rd.every {
			rd.read()
			rd.last = time.Now()
		}
		rd.mu.Unlock()
	}
	select {
	case <-rd.ready:
		fmt.Fprintln(w, "Ready")
	default:
		http.Error(w, "Not ready: a source has not been read successfully yet (pcp_exporter_source_up on /metrics says why)", http.StatusServiceUnavailable)
	}
}

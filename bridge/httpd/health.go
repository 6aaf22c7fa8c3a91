package httpd

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// Watchdog decides liveness: the exporter is wedged when a probe of the
// sources (their status, which takes an MMV directory's lock) has not
// returned within the timeout, or when a scrape has run longer than the
// write timeout (which ends scrapes blocked on a client that does not
// read) plus the timeout. At most one probe is outstanding: a wedged
// source holds one goroutine, not one per health check.
type Watchdog struct {
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

// NewWatchdog returns the watchdog of a probe of the sources, the health
// timeout and the server's write timeout (0: none).
func NewWatchdog(timeout, writeTimeout time.Duration, probe func()) *Watchdog {
	return &Watchdog{timeout: timeout, writeTimeout: writeTimeout, probe: probe, now: time.Now, scrapes: map[uint64]time.Time{}}
}

// Track wraps the scrape handler: each request's start is kept while it runs.
func (wd *Watchdog) Track(h http.Handler) http.Handler {
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
func (wd *Watchdog) check(ctx context.Context, wait time.Duration) string {
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

// Healthy answers /-/healthy from the watchdog, logging each change.
func (wd *Watchdog) Healthy(logger *slog.Logger) http.HandlerFunc {
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

// Readiness answers /-/ready: ready once Ready is closed (every source
// has been read successfully). Before that a request may call Read, at
// most one at a time and one per Every, so that unauthenticated or
// frequent probes cost no more than one scrape a second.
type Readiness struct {
	Ready <-chan struct{}
	Read  func()
	Every time.Duration

	mu   sync.Mutex
	last time.Time
}

// ServeHTTP answers 200 "Ready" once the sources were read (reading them
// at most once per Every while they are not), else 503.
func (rd *Readiness) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	select {
	case <-rd.Ready:
		fmt.Fprintln(w, "Ready")
		return
	default:
	}
	if rd.mu.TryLock() {
		if time.Since(rd.last) >= rd.Every {
			rd.Read()
			rd.last = time.Now()
		}
		rd.mu.Unlock()
	}
	select {
	case <-rd.Ready:
		fmt.Fprintln(w, "Ready")
	default:
		http.Error(w, "Not ready: a source has not been read successfully yet (pcp_exporter_source_up on /metrics says why)", http.StatusServiceUnavailable)
	}
}

package httpd

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pcp-exporter/pcp-exporter/internal/selfmetric"
)

// Reloader reloads the configuration on SIGHUP (Watch) and on POST or PUT
// /-/reload (ServeHTTP), as Prometheus and statsd_exporter do: a
// configuration that does not load keeps the one in use, logs why and sets
// pcp_exporter_config_last_reload_successful to 0.
type Reloader struct {
	mu     sync.Mutex
	load   func() error
	logger *slog.Logger
	attrs  []any
	ok, at prometheus.Gauge
}

// NewReloader returns the reloader of load, which loads every
// configuration and swaps them in only when all of them load; attrs (the
// files, as key-value pairs) go into the log line of a reload. The two
// gauges of the last reload are registered with reg.
func NewReloader(load func() error, logger *slog.Logger, reg prometheus.Registerer, attrs ...any) *Reloader {
	r := &Reloader{load: load, logger: logger, attrs: attrs,
		ok: selfmetric.ReloadSuccessful.NewGauge(),
		at: selfmetric.ReloadSuccessTime.NewGauge(),
	}
	r.ok.Set(1)
	r.at.SetToCurrentTime()
	reg.MustRegister(r.ok, r.at)
	return r
}

// Reload loads the configuration and swaps it in, or keeps the one in use
// and returns why.
func (r *Reloader) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	err := r.load()
	if err != nil {
		r.ok.Set(0)
		r.logger.Error("configuration reload failed: keeping the configuration in use", "err", err)
		return err
	}
	r.ok.Set(1)
	r.at.SetToCurrentTime()
	r.logger.Info("configuration reloaded", r.attrs...)
	return nil
}

// ServeHTTP serves POST /-/reload: 200 when reloaded, 500 with the reason
// when not (the old configuration stays).
func (r *Reloader) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost && req.Method != http.MethodPut {
		w.Header().Set("Allow", "POST, PUT")
		http.Error(w, "only POST or PUT requests allowed", http.StatusMethodNotAllowed)
		return
	}
	if err := r.Reload(); err != nil {
		http.Error(w, fmt.Sprintf("failed to reload config: %s", err), http.StatusInternalServerError)
		return
	}
	fmt.Fprintln(w, "Reloaded")
}

// Watch reloads on every SIGHUP until ctx ends.
func (r *Reloader) Watch(ctx context.Context) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				r.Reload()
			}
		}
	}()
}

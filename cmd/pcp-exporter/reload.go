package main

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

	"github.com/pcp-exporter/pcp-exporter/bridge"
	"github.com/pcp-exporter/pcp-exporter/derive"
	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// reloader reloads serve's mapping (--mapping.config) and derived metrics
// (--derived.config) on SIGHUP and on POST /-/reload, as Prometheus and
// statsd_exporter do: a configuration that does not load keeps the one in
// use, logs why and sets pcp_exporter_config_last_reload_successful to 0.
type reloader struct {
	mu     sync.Mutex
	f      *serveFlags
	col    *bridge.Collector
	logger *slog.Logger
	ok, at prometheus.Gauge
}

func newReloader(f *serveFlags, col *bridge.Collector, logger *slog.Logger, reg prometheus.Registerer) *reloader {
	r := &reloader{f: f, col: col, logger: logger,
		ok: prometheus.NewGauge(prometheus.GaugeOpts{Name: "pcp_exporter_config_last_reload_successful", Help: "Whether the last configuration reload (mapping and derived metrics) succeeded."}),
		at: prometheus.NewGauge(prometheus.GaugeOpts{Name: "pcp_exporter_config_last_reload_success_timestamp_seconds", Help: "Timestamp of the last successful configuration load."}),
	}
	r.ok.Set(1)
	r.at.SetToCurrentTime()
	reg.MustRegister(r.ok, r.at)
	return r
}

// reload loads both configurations and swaps them in, or keeps the old
// ones and returns why.
func (r *reloader) reload() error {
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
	r.logger.Info("configuration reloaded", "mapping.config", r.f.mappingFile, "derived.config", r.f.derived.config)
	return nil
}

// reconfigurable is what a reload reconfigures: the collector of /metrics
// and the OTLP pushes' producers.
type reconfigurable interface {
	Sources() []source.Source
	Reconfigure(*mapping.Mapper, []source.Source) error
}

// load loads the configurations and, when all of them load, swaps them in
// everywhere.
func (r *reloader) load() error {
	mapper, err := newMapper(r.f.mappingFile, r.f.naming, r.f.fullLabels)
	if err != nil {
		return err
	}
	all := append([]reconfigurable{r.col}, r.f.reconfigurables...)
	srcs := make([][]source.Source, len(all))
	for i, c := range all {
		for _, s := range c.Sources() {
			base := s
			if d, ok := s.(*derive.Source); ok {
				base = d.Unwrap()
			}
			w, err := r.f.derived.wrap(base, r.logger)
			if err != nil {
				return fmt.Errorf("derived.config: %w", err)
			}
			srcs[i] = append(srcs[i], w)
		}
	}
	for i, c := range all {
		if err := c.Reconfigure(mapper, srcs[i]); err != nil {
			return err
		}
	}
	return nil
}

// handle serves POST /-/reload: 200 when reloaded, 500 with the reason when
// not (the old configuration stays).
func (r *reloader) handle(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost && req.Method != http.MethodPut {
		w.Header().Set("Allow", "POST, PUT")
		http.Error(w, "only POST or PUT requests allowed", http.StatusMethodNotAllowed)
		return
	}
	if err := r.reload(); err != nil {
		http.Error(w, fmt.Sprintf("failed to reload config: %s", err), http.StatusInternalServerError)
		return
	}
	fmt.Fprintln(w, "Reloaded")
}

// watch reloads on every SIGHUP until ctx ends.
func (r *reloader) watch(ctx context.Context) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				r.reload()
			}
		}
	}()
}

package main

import (
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pcp-exporter/pcp-exporter/bridge"
	"github.com/pcp-exporter/pcp-exporter/bridge/httpd"
	"github.com/pcp-exporter/pcp-exporter/derive"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// newReloader reloads serve's mapping (--mapping.config) and derived
// metrics (--derived.config) in targets (the collector and the OTLP
// pushes' producers), on
// SIGHUP and on POST /-/reload: a configuration that does not load keeps
// the one in use.
func newReloader(f *serveFlags, targets []bridge.Reconfigurable, logger *slog.Logger, reg prometheus.Registerer) *httpd.Reloader {
	load := func() error {
		mapper, err := newMapper(f.mappingFile, f.naming, f.fullLabels, &f.lean)
		if err != nil {
			return err
		}
		rewrap := func(s source.Source) (source.Source, error) {
			w, err := f.derived.wrap(derive.Underlying(s), logger)
			if err != nil {
				return nil, fmt.Errorf("derived.config: %w", err)
			}
			return w, nil
		}
		return bridge.ReconfigureAll(mapper, rewrap, targets...)
	}
	return httpd.NewReloader(load, logger, reg, "mapping.config", f.mappingFile, "derived.config", f.derived.config)
}

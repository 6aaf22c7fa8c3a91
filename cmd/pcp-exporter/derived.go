package main

import (
	"errors"
	"log/slog"

	"github.com/alecthomas/kingpin/v2"

	"github.com/pcp-exporter/pcp-exporter/derive"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// derivedFlags is the --derived.config flag that serve, replay, info, fetch
// and backfill share. Typical use in a command's setup:
//
//	dflags := addDerivedFlags(cmd)
//	...
//	src, err = dflags.wrap(src, logger) // adds the derived metrics, or returns src
type derivedFlags struct {
	config string
}

func addDerivedFlags(cmd *kingpin.CmdClause) *derivedFlags {
	f := &derivedFlags{}
	cmd.Flag("derived.config", "Derived metric definitions in pmLoadDerivedConfig(3) format: files and directories separated by ':' (default $PCP_DERIVED_CONFIG; empty loads none).").
		Envar("PCP_DERIVED_CONFIG").PlaceHolder("PATH").StringVar(&f.config)
	return f
}

// definitions loads the configured definitions: nil when none is
// configured. Bad lines are logged and skipped (as libpcp skips them); an
// unreadable path is an error.
func (f *derivedFlags) definitions(logger *slog.Logger) ([]derive.Definition, error) {
	if f == nil || f.config == "" {
		return nil, nil
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	defs, errs := derive.LoadConfig(f.config)
	for _, err := range errs {
		var ce *derive.ConfigError
		if !errors.As(err, &ce) {
			return nil, err
		}
		logger.Warn("derived metrics config", "err", ce.Error(), "detail", ce.Detail)
	}
	return defs, nil
}

// wrap adds the configured derived metrics to src (src itself when none is
// configured). Semantic errors are logged; the metrics concerned are absent.
func (f *derivedFlags) wrap(src source.Source, logger *slog.Logger) (source.Source, error) {
	defs, err := f.definitions(logger)
	if err != nil || defs == nil {
		return src, err
	}
	return derive.Wrap(src, defs, logger)
}

// describe returns metrics (of a source that is only described, as by info)
// with the configured derived metrics added, in name order.
func (f *derivedFlags) describe(metrics []source.Metric, logger *slog.Logger) ([]source.Metric, error) {
	defs, err := f.definitions(logger)
	if err != nil || defs == nil {
		return metrics, err
	}
	ms, errs := derive.Describe(metrics, defs)
	if logger != nil {
		for _, e := range errs {
			logger.Warn(e.Error())
		}
	}
	return ms, nil
}

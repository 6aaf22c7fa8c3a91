package main

import (
	"log/slog"

	"github.com/alecthomas/kingpin/v2"

	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/probe"
	"github.com/pcp-exporter/pcp-exporter/source/pmcd"
)

// authFlags name the file of auths and modules (--pmcd.config) and the
// auth of the --pmcd sources (--pmcd.auth).
type authFlags struct {
	config string
	auth   string
}

func addAuthFlags(cmd *kingpin.CmdClause) *authFlags {
	f := &authFlags{}
	cmd.Flag("pmcd.config", "File of named auths (TLS, SASL; secrets from files or the environment), modules (metric selections) and /probe limits and allow list; serve then answers /probe?target=&module=&auth=. Reloaded with the mapping.").PlaceHolder("FILE").StringVar(&f.config)
	cmd.Flag("pmcd.auth", "Auth of --pmcd.config to connect to the --pmcd pmcds with (TLS and/or SASL).").PlaceHolder("NAME").StringVar(&f.auth)
	return f
}

// load reads --pmcd.config (nil when not given).
func (f *authFlags) load() (*probe.Config, error) {
	if f.config == "" {
		if f.auth != "" {
			return nil, usagef("--pmcd.auth=%s needs --pmcd.config", f.auth)
		}
		return nil, nil
	}
	cfg, err := probe.Load(f.config)
	if err != nil {
		return nil, usagef("--pmcd.config: %v", err)
	}
	return cfg, nil
}

// security is the --pmcd.auth's.
func (f *authFlags) security() (*pmcd.Security, error) {
	cfg, err := f.load()
	if err != nil || cfg == nil {
		return nil, err
	}
	sec, err := cfg.Security(f.auth)
	if err != nil {
		return nil, usagef("--pmcd.auth: %v", err)
	}
	return sec, nil
}

// newProbeHandler is serve's /probe when --pmcd.config is given.
func newProbeHandler(f *serveFlags, mapper *mapping.Mapper, logger *slog.Logger) (*probe.Handler, error) {
	cfg, err := f.pmcd.auth.load()
	if err != nil || cfg == nil {
		return nil, err
	}
	return probe.New(cfg, mapper, logger), nil
}

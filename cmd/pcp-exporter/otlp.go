package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pcp-exporter/pcp-exporter/bridge"
	"github.com/pcp-exporter/pcp-exporter/mapping"
)

// addOTLPFlags adds serve's OTLP push flags, filling a bridge.OTLPConfig.
// The standard OTEL_EXPORTER_OTLP_* environment variables apply to what
// the flags leave unset.
func addOTLPFlags(cmd *kingpin.CmdClause) *bridge.OTLPConfig {
	c := &bridge.OTLPConfig{Headers: map[string]string{}}
	cmd.Flag("otlp.endpoint", "Push metrics to this OTLP endpoint as well: HOST:PORT for grpc, a URL for http/protobuf (default: $OTEL_EXPORTER_OTLP_ENDPOINT; no push when neither is set).").PlaceHolder("ENDPOINT").StringVar(&c.Endpoint)
	cmd.Flag("otlp.protocol", "OTLP protocol: grpc or http/protobuf (default: $OTEL_EXPORTER_OTLP_PROTOCOL, else grpc).").Default(envOr("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")).EnumVar(&c.Protocol, "grpc", "http/protobuf")
	cmd.Flag("otlp.interval", "Time between pushes.").Default("15s").DurationVar(&c.Interval)
	cmd.Flag("otlp.timeout", "Timeout of one push.").Default("10s").DurationVar(&c.Timeout)
	cmd.Flag("otlp.headers", "Header sent with every push (KEY=VALUE, repeatable).").StringMapVar(&c.Headers)
	cmd.Flag("otlp.insecure", "Push without TLS.").BoolVar(&c.Insecure)
	cmd.Flag("otlp.tls.ca-file", "CA certificates that verify the OTLP receiver.").PlaceHolder("FILE").StringVar(&c.CAFile)
	cmd.Flag("otlp.tls.cert-file", "Client certificate for the OTLP receiver.").PlaceHolder("FILE").StringVar(&c.CertFile)
	cmd.Flag("otlp.tls.key-file", "Client key for the OTLP receiver.").PlaceHolder("FILE").StringVar(&c.KeyFile)
	return c
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// checkOTLP rejects intervals and timeouts that are not positive, naming
// the flag and the value.
func checkOTLP(c *bridge.OTLPConfig) error {
	if c.Interval <= 0 {
		return usagef("--otlp.interval=%v: want a positive duration", c.Interval)
	}
	if c.Timeout <= 0 {
		return usagef("--otlp.timeout=%v: want a positive duration", c.Timeout)
	}
	return nil
}

// addServeOTLP adds the OTLP push flags to serve and the push to its start.
func addServeOTLP(cmd *kingpin.CmdClause, sf *serveFlags) {
	c := addOTLPFlags(cmd)
	sf.otlpCheck = func() error { return checkOTLP(c) }
	sf.otlpStarters = append(sf.otlpStarters, func(ctx context.Context, logger *slog.Logger, reg prometheus.Registerer, open func() ([]bridge.Source, func(), error), mapper *mapping.Mapper) (func(), error) {
		if !c.Enabled() {
			return func() {}, nil
		}
		// Sources of its own: a replay read by both the scrapes and the
		// pushes would be asked for times going back and forth.
		srcs, closeSrcs, err := open()
		if err != nil {
			return nil, err
		}
		stop, producers, err := c.StartPush(ctx, logger, reg, srcs, mapper)
		if err != nil {
			closeSrcs()
			return nil, err
		}
		for _, p := range producers {
			sf.reconfigurables = append(sf.reconfigurables, p)
		}
		return func() { stop(); closeSrcs() }, nil
	})
}

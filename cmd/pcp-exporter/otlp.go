package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pcp-exporter/pcp-exporter/bridge"
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
	cmd.Flag("otlp.insecure", "Push without TLS, as a receiver without TLS settings (the Collector's default otlp receiver) needs; pushing with TLS to one is reported at start with this hint.").BoolVar(&c.Insecure)
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

// startServePush starts serve's OTLP push when an endpoint is set: it
// reads through the scrapes' Collector (each source opened once, one
// reload). It returns the function that stops the push.
func startServePush(ctx context.Context, f *serveFlags, logger *slog.Logger, reg prometheus.Registerer, col *bridge.Collector) (func(), error) {
	if !f.otlp.Enabled() {
		return func() {}, nil
	}
	return f.otlp.StartPush(ctx, logger, reg, col.OTel())
}

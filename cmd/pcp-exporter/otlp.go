package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"google.golang.org/grpc/credentials"

	"github.com/pcp-exporter/pcp-exporter/bridge"
	"github.com/pcp-exporter/pcp-exporter/mapping"
)

// otlpFlags are the OTLP push flags of serve. The standard OTEL_EXPORTER_OTLP_*
// environment variables apply to what the flags leave unset.
type otlpFlags struct {
	endpoint string
	protocol string
	interval time.Duration
	timeout  time.Duration
	headers  map[string]string
	insecure bool
	caFile   string
	certFile string
	keyFile  string
}

func addOTLPFlags(cmd *kingpin.CmdClause) *otlpFlags {
	f := &otlpFlags{headers: map[string]string{}}
	cmd.Flag("otlp.endpoint", "Push metrics to this OTLP endpoint as well: HOST:PORT for grpc, a URL for http/protobuf (default: $OTEL_EXPORTER_OTLP_ENDPOINT; no push when neither is set).").PlaceHolder("ENDPOINT").StringVar(&f.endpoint)
	cmd.Flag("otlp.protocol", "OTLP protocol: grpc or http/protobuf (default: $OTEL_EXPORTER_OTLP_PROTOCOL, else grpc).").Default(envOr("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")).EnumVar(&f.protocol, "grpc", "http/protobuf")
	cmd.Flag("otlp.interval", "Time between pushes.").Default("15s").DurationVar(&f.interval)
	cmd.Flag("otlp.timeout", "Timeout of one push.").Default("10s").DurationVar(&f.timeout)
	cmd.Flag("otlp.headers", "Header sent with every push (KEY=VALUE, repeatable).").StringMapVar(&f.headers)
	cmd.Flag("otlp.insecure", "Push without TLS.").BoolVar(&f.insecure)
	cmd.Flag("otlp.tls.ca-file", "CA certificates that verify the OTLP receiver.").PlaceHolder("FILE").StringVar(&f.caFile)
	cmd.Flag("otlp.tls.cert-file", "Client certificate for the OTLP receiver.").PlaceHolder("FILE").StringVar(&f.certFile)
	cmd.Flag("otlp.tls.key-file", "Client key for the OTLP receiver.").PlaceHolder("FILE").StringVar(&f.keyFile)
	return f
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// check rejects intervals and timeouts that are not positive, naming the
// flag and the value.
func (f *otlpFlags) check() error {
	if f.interval <= 0 {
		return usagef("--otlp.interval=%v: want a positive duration", f.interval)
	}
	if f.timeout <= 0 {
		return usagef("--otlp.timeout=%v: want a positive duration", f.timeout)
	}
	return nil
}

// enabled reports whether a push is configured.
func (f *otlpFlags) enabled() bool {
	return f.endpoint != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") != ""
}

func (f *otlpFlags) tlsConfig() (*tls.Config, error) {
	if f.caFile == "" && f.certFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.caFile != "" {
		pem, err := os.ReadFile(f.caFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no certificate", f.caFile)
		}
		cfg.RootCAs = pool
	}
	if f.certFile != "" {
		c, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return cfg, nil
}

// otlpExporter builds the OTLP metric exporter of the flags (protocol,
// endpoint, TLS, headers, retries with backoff).
func (f *otlpFlags) exporter(ctx context.Context) (sdkmetric.Exporter, error) {
	tlsCfg, err := f.tlsConfig()
	if err != nil {
		return nil, err
	}
	if f.protocol == "http/protobuf" {
		opts := []otlpmetrichttp.Option{otlpmetrichttp.WithTimeout(f.timeout),
			otlpmetrichttp.WithRetry(otlpmetrichttp.RetryConfig{Enabled: true, InitialInterval: time.Second, MaxInterval: 30 * time.Second, MaxElapsedTime: f.interval})}
		if f.endpoint != "" {
			if strings.Contains(f.endpoint, "://") {
				u, err := url.Parse(f.endpoint)
				if err != nil {
					return nil, fmt.Errorf("--otlp.endpoint: %w", err)
				}
				if u.Path == "" || u.Path == "/" {
					u.Path = "/v1/metrics" // a base URL, as OTEL_EXPORTER_OTLP_ENDPOINT is
				}
				opts = append(opts, otlpmetrichttp.WithEndpointURL(u.String()))
			} else {
				opts = append(opts, otlpmetrichttp.WithEndpoint(f.endpoint))
			}
		}
		if f.insecure {
			opts = append(opts, otlpmetrichttp.WithInsecure())
		}
		if tlsCfg != nil {
			opts = append(opts, otlpmetrichttp.WithTLSClientConfig(tlsCfg))
		}
		if len(f.headers) > 0 {
			opts = append(opts, otlpmetrichttp.WithHeaders(f.headers))
		}
		return otlpmetrichttp.New(ctx, opts...)
	}
	opts := []otlpmetricgrpc.Option{otlpmetricgrpc.WithTimeout(f.timeout),
		otlpmetricgrpc.WithRetry(otlpmetricgrpc.RetryConfig{Enabled: true, InitialInterval: time.Second, MaxInterval: 30 * time.Second, MaxElapsedTime: f.interval})}
	if f.endpoint != "" {
		if strings.Contains(f.endpoint, "://") {
			opts = append(opts, otlpmetricgrpc.WithEndpointURL(f.endpoint))
		} else {
			opts = append(opts, otlpmetricgrpc.WithEndpoint(f.endpoint))
		}
	}
	if f.insecure {
		opts = append(opts, otlpmetricgrpc.WithInsecure())
	}
	if tlsCfg != nil {
		opts = append(opts, otlpmetricgrpc.WithTLSCredentials(credentials.NewTLS(tlsCfg)))
	}
	if len(f.headers) > 0 {
		opts = append(opts, otlpmetricgrpc.WithHeaders(f.headers))
	}
	return otlpmetricgrpc.New(ctx, opts...)
}

// startPush starts pushing srcs with a periodic reader; export failures are
// retried by the exporter, logged, and counted in
// pcp_exporter_otlp_export_errors_total, and serving goes on. It returns
// the producers (one per source), which a reload reconfigures.
func (f *otlpFlags) startPush(ctx context.Context, logger *slog.Logger, reg prometheus.Registerer, srcs []bridge.Source, mapper *mapping.Mapper) (func(), []*bridge.OTelProducer, error) {
	errCount := prometheus.NewCounter(prometheus.CounterOpts{Name: "pcp_exporter_otlp_export_errors_total", Help: "OTLP pushes that failed (after the exporter's retries)."})
	if reg != nil {
		reg.MustRegister(errCount)
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		errCount.Inc()
		logger.Warn("OTLP push failed", "err", err)
	}))
	// one provider per source: each source is a resource of its own
	// (host.name, service.name, ...)
	var mps []*sdkmetric.MeterProvider
	var producers []*bridge.OTelProducer
	stop := func() {
		sctx, cancel := context.WithTimeout(context.Background(), f.timeout)
		defer cancel()
		for _, mp := range mps {
			if err := mp.Shutdown(sctx); err != nil && !errors.Is(err, context.Canceled) {
				logger.Warn("OTLP shutdown", "err", err)
			}
		}
	}
	for _, src := range srcs {
		exp, err := f.exporter(ctx)
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("otlp: %w", err)
		}
		producer := bridge.NewOTelProducer(mapper, logger, src)
		producers = append(producers, producer)
		reader := sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(f.interval), sdkmetric.WithTimeout(f.timeout),
			sdkmetric.WithProducer(producer))
		mps = append(mps, sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithResource(bridge.Resource(mapper, src))))
	}
	logger.Info("pushing metrics over OTLP", "protocol", f.protocol, "endpoint", f.endpoint, "interval", f.interval)
	return stop, producers, nil
}

// addServeOTLP adds the OTLP push flags to serve and the push to its start.
func addServeOTLP(cmd *kingpin.CmdClause, sf *serveFlags) {
	f := addOTLPFlags(cmd)
	sf.otlpCheck = f.check
	sf.otlpStarters = append(sf.otlpStarters, func(ctx context.Context, logger *slog.Logger, reg prometheus.Registerer, open func() ([]bridge.Source, func(), error), mapper *mapping.Mapper) (func(), error) {
		if !f.enabled() {
			return func() {}, nil
		}
		// Sources of its own: a replay read by both the scrapes and the
		// pushes would be asked for times going back and forth.
		srcs, closeSrcs, err := open()
		if err != nil {
			return nil, err
		}
		stop, producers, err := f.startPush(ctx, logger, reg, srcs, mapper)
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

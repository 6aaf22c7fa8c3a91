package bridge

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"google.golang.org/grpc/credentials"

	"github.com/pcp-exporter/pcp-exporter/internal/selfmetric"
)

// OTLPConfig configures an OTLP metric exporter: serve's periodic push
// and backfill's OTLP sink. The standard OTEL_EXPORTER_OTLP_* environment
// variables apply to what it leaves unset.
type OTLPConfig struct {
	// Endpoint is HOST:PORT for grpc, a URL for http/protobuf (a base
	// URL gets /v1/metrics, as OTEL_EXPORTER_OTLP_ENDPOINT does).
	Endpoint string
	// Protocol is grpc or http/protobuf.
	Protocol string
	// Interval is the time between pushes, and the longest the exporter
	// retries one.
	Interval time.Duration
	// Timeout is the timeout of one push.
	Timeout time.Duration
	// Headers are sent with every push.
	Headers map[string]string
	// Insecure pushes without TLS.
	Insecure bool
	// CAFile verifies the receiver; CertFile and KeyFile are the client's
	// certificate.
	CAFile, CertFile, KeyFile string
	// NoRetry turns the exporter's own retries off, for a caller that
	// retries itself (the backfill).
	NoRetry bool
}

// HTTPTarget returns the OTLP/HTTP metrics URL of the config (a base URL
// gets /v1/metrics; HOST:PORT is https, http with Insecure) and a client
// with its TLS settings and timeout, for a caller that posts requests
// itself (the backfill).
func (c *OTLPConfig) HTTPTarget() (string, *http.Client, error) {
	tlsCfg, err := c.tlsConfig()
	if err != nil {
		return "", nil, err
	}
	raw := c.Endpoint
	if !strings.Contains(raw, "://") {
		scheme := "https://"
		if c.Insecure {
			scheme = "http://"
		}
		raw = scheme + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", nil, fmt.Errorf("otlp endpoint: %w", err)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/metrics"
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if tlsCfg != nil {
		tr.TLSClientConfig = tlsCfg
	}
	return u.String(), &http.Client{Timeout: c.Timeout, Transport: tr}, nil
}

// Enabled reports whether a push is configured: an endpoint in the
// config or in the environment.
func (c *OTLPConfig) Enabled() bool {
	return c.Endpoint != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") != ""
}

func (c *OTLPConfig) tlsConfig() (*tls.Config, error) {
	if c.CAFile == "" && c.CertFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no certificate", c.CAFile)
		}
		cfg.RootCAs = pool
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// Exporter builds the OTLP metric exporter of the config (protocol,
// endpoint, TLS, headers, retries with backoff).
func (c *OTLPConfig) Exporter(ctx context.Context) (sdkmetric.Exporter, error) {
	tlsCfg, err := c.tlsConfig()
	if err != nil {
		return nil, err
	}
	if c.Protocol == "http/protobuf" {
		opts := []otlpmetrichttp.Option{otlpmetrichttp.WithTimeout(c.Timeout),
			otlpmetrichttp.WithRetry(otlpmetrichttp.RetryConfig{Enabled: !c.NoRetry, InitialInterval: time.Second, MaxInterval: 30 * time.Second, MaxElapsedTime: c.Interval})}
		if c.Endpoint != "" {
			if strings.Contains(c.Endpoint, "://") {
				u, err := url.Parse(c.Endpoint)
				if err != nil {
					return nil, fmt.Errorf("--otlp.endpoint: %w", err)
				}
				if u.Path == "" || u.Path == "/" {
					u.Path = "/v1/metrics" // a base URL, as OTEL_EXPORTER_OTLP_ENDPOINT is
				}
				opts = append(opts, otlpmetrichttp.WithEndpointURL(u.String()))
			} else {
				opts = append(opts, otlpmetrichttp.WithEndpoint(c.Endpoint))
			}
		}
		if c.Insecure {
			opts = append(opts, otlpmetrichttp.WithInsecure())
		}
		if tlsCfg != nil {
			opts = append(opts, otlpmetrichttp.WithTLSClientConfig(tlsCfg))
		}
		if len(c.Headers) > 0 {
			opts = append(opts, otlpmetrichttp.WithHeaders(c.Headers))
		}
		return otlpmetrichttp.New(ctx, opts...)
	}
	opts := []otlpmetricgrpc.Option{otlpmetricgrpc.WithTimeout(c.Timeout),
		otlpmetricgrpc.WithRetry(otlpmetricgrpc.RetryConfig{Enabled: !c.NoRetry, InitialInterval: time.Second, MaxInterval: 30 * time.Second, MaxElapsedTime: c.Interval})}
	if c.Endpoint != "" {
		if strings.Contains(c.Endpoint, "://") {
			opts = append(opts, otlpmetricgrpc.WithEndpointURL(c.Endpoint))
		} else {
			opts = append(opts, otlpmetricgrpc.WithEndpoint(c.Endpoint))
		}
	}
	if c.Insecure {
		opts = append(opts, otlpmetricgrpc.WithInsecure())
	}
	if tlsCfg != nil {
		opts = append(opts, otlpmetricgrpc.WithTLSCredentials(credentials.NewTLS(tlsCfg)))
	}
	if len(c.Headers) > 0 {
		opts = append(opts, otlpmetricgrpc.WithHeaders(c.Headers))
	}
	return otlpmetricgrpc.New(ctx, opts...)
}

// StartPush pushes what p reads every interval (and once more when
// stopped), one request per resource (host), through the config's
// exporter; failures are retried by the exporter, logged, and counted in
// pcp_exporter_otlp_export_errors_total (registered with reg when not
// nil), and serving goes on. It returns the function that stops the
// pushes.
func (c *OTLPConfig) StartPush(ctx context.Context, logger *slog.Logger, reg prometheus.Registerer, p *OTelProducer) (func(), error) {
	errCount := selfmetric.OTLPExportErrors.NewCounter()
	if reg != nil {
		reg.MustRegister(errCount)
	}
	fail := func(err error) {
		errCount.Inc()
		if strings.Contains(err.Error(), plaintextAnswer) {
			logger.Warn("OTLP push failed", "err", err, "hint", plaintextHint)
			return
		}
		logger.Warn("OTLP push failed", "err", err)
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(fail))
	exp, err := c.Exporter(ctx)
	if err != nil {
		return nil, fmt.Errorf("otlp: %w", err)
	}
	go c.checkTLS(logger)
	push := func() {
		rms, _, err := p.Read(time.Now())
		if err != nil {
			logger.Debug("OTLP push: reading a source failed", "err", err) // logged once per change by the Collector
		}
		for i := range rms {
			ectx, cancel := context.WithTimeout(context.Background(), c.Interval+c.Timeout)
			err := exp.Export(ectx, &rms[i])
			cancel()
			if err != nil {
				fail(err)
			}
		}
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(c.Interval)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				push()
			case <-done:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			close(done)
			<-stopped
			push() // the last values, as the SDK's periodic reader does at shutdown
			sctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
			defer cancel()
			if err := exp.Shutdown(sctx); err != nil && !errors.Is(err, context.Canceled) {
				logger.Warn("OTLP shutdown", "err", err)
			}
		})
	}
	logger.Info("pushing metrics over OTLP", "protocol", c.Protocol, "endpoint", c.Endpoint, "interval", c.Interval)
	return stop, nil
}

// plaintextAnswer is what crypto/tls says of a receiver that answers a TLS
// handshake in plaintext (tls.RecordHeaderError); plaintextHint says what
// to do.
const (
	plaintextAnswer = "first record does not look like a TLS handshake"
	plaintextHint   = "the OTLP receiver speaks plaintext (the Collector's otlp receiver without tls settings): push with --otlp.insecure (OTEL_EXPORTER_OTLP_INSECURE=true), or give the receiver TLS"
)

// checkTLS makes one TLS handshake with the receiver at start, so that a
// plaintext receiver is reported at once with what to do, not after the
// first push (an interval) and its retries. Other failures are left to
// the pushes' own reports.
func (c *OTLPConfig) checkTLS(logger *slog.Logger) {
	addr, ok := c.tlsAddr()
	if !ok {
		return
	}
	cfg, err := c.tlsConfig()
	if err != nil {
		return
	}
	if cfg == nil {
		cfg = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	cfg = cfg.Clone()
	cfg.InsecureSkipVerify = true // only whether TLS is spoken; the pushes verify
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: c.Timeout}, "tcp", addr, cfg)
	if err != nil {
		if strings.Contains(err.Error(), plaintextAnswer) {
			logger.Warn("OTLP receiver does not speak TLS", "endpoint", addr, "hint", plaintextHint)
		}
		return
	}
	conn.Close()
}

// tlsAddr is the HOST:PORT the pushes reach over TLS, if they use TLS.
func (c *OTLPConfig) tlsAddr() (string, bool) {
	if c.Insecure || strings.EqualFold(os.Getenv("OTEL_EXPORTER_OTLP_INSECURE"), "true") || strings.EqualFold(os.Getenv("OTEL_EXPORTER_OTLP_METRICS_INSECURE"), "true") {
		return "", false
	}
	ep := c.Endpoint
	if ep == "" {
		if ep = os.Getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"); ep == "" {
			ep = os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
		}
	}
	if ep == "" {
		return "", false
	}
	if !strings.Contains(ep, "://") {
		return ep, true
	}
	u, err := url.Parse(ep)
	if err != nil || u.Scheme != "https" {
		return "", false
	}
	if u.Port() == "" {
		return net.JoinHostPort(u.Hostname(), "443"), true
	}
	return u.Host, true
}

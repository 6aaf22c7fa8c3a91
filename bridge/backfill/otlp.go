package backfill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/pcp-exporter/pcp-exporter/bridge"
	"github.com/pcp-exporter/pcp-exporter/mapping"
)

// Exporter is the part of an OTLP metric exporter (otlpmetricgrpc,
// otlpmetrichttp) the OTLP sink uses.
type Exporter interface {
	Export(context.Context, *metricdata.ResourceMetrics) error
	Shutdown(context.Context) error
}

// OTLPSink sends samples with their original timestamps over OTLP, encoded
// as the live push encodes its reads (bridge.OTelBatch): counters as
// monotonic cumulative sums (start time: Sample.Start, the live push's
// rule), other metrics as gauges, with the instruments' names, UCUM units
// and values of the mapper's OTel form (Run maps with it for this sink). Requests are retried as remote write
// retries them (retrier): over HTTP a 4xx other than 429 rejects the batch
// (counted with the receiver's reason; the run goes on), 429, 5xx and
// network errors are retried (after Retry-After when given); over gRPC the
// codes OTLP calls retryable (UNAVAILABLE, RESOURCE_EXHAUSTED, ABORTED,
// OUT_OF_RANGE, DATA_LOSS, DEADLINE_EXCEEDED, CANCELLED) are retried and the
// others reject the batch. Data points a receiver refuses in a partial
// success are counted as rejected.
//
// Idempotence: a request whose answer is lost (timeout) is sent again and
// counted as possibly duplicated; receivers that keep every point (the
// collector passes each on) store it twice; a Prometheus receiver behind
// it ignores equal samples, VictoriaMetrics needs -dedup.minScrapeInterval.
type OTLPSink struct {
	exp Exporter // gRPC (the SDK's exporter, its own retries off)

	url     string // HTTP: the /v1/metrics URL
	client  *http.Client
	headers map[string]string

	Logger *slog.Logger
	// MaxRetryTime, MinBackoff, MaxBackoff and MaxRetryAfter are as
	// RemoteWriteSink's; Retries counts the retried requests.
	MaxRetryTime, MinBackoff, MaxBackoff, MaxRetryAfter time.Duration
	Retries                                             int
}

// NewOTLPSink sends through exp, an exporter whose own retries are off
// (OTLPConfig.NoRetry): gRPC.
func NewOTLPSink(exp Exporter, logger *slog.Logger) *OTLPSink {
	s := newOTLPSink(logger)
	s.exp = exp
	return s
}

// NewOTLPHTTPSink posts OTLP/HTTP protobuf requests to url (the
// /v1/metrics endpoint) with client, adding headers.
func NewOTLPHTTPSink(url string, client *http.Client, headers map[string]string, logger *slog.Logger) *OTLPSink {
	s := newOTLPSink(logger)
	s.url, s.client, s.headers = url, client, headers
	return s
}

func newOTLPSink(logger *slog.Logger) *OTLPSink {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &OTLPSink{Logger: logger, MaxRetryTime: 10 * time.Minute, MinBackoff: 100 * time.Millisecond,
		MaxBackoff: 5 * time.Second, MaxRetryAfter: 5 * time.Minute}
}

// Write exports one batch as one request per host, encoded as the live
// push encodes its reads (bridge.OTelBatch).
func (s *OTLPSink) Write(ctx context.Context, batch []Sample) (Outcome, error) {
	var b bridge.OTelBatch
	for i := range batch {
		smp := &batch[i]
		f := smp.Series.Family
		if f.Name == mapping.TargetInfoName {
			continue // the resource
		}
		attrs := make([]attribute.KeyValue, len(smp.Series.Attrs))
		for i, l := range smp.Series.Attrs {
			attrs[i] = attribute.String(l.Name, l.Value)
		}
		var start time.Time
		if smp.Start != 0 {
			start = time.Unix(0, smp.Start)
		}
		b.Add(bridge.ResourceKey(smp.Series.Resource), smp.Series.Resource, f, attribute.NewSet(attrs...), start, time.UnixMilli(smp.T), smp.V)
	}
	rms, points := b.ResourceMetrics()
	var out Outcome
	r := &retrier{what: "otlp", logger: s.Logger, maxRetryTime: s.MaxRetryTime, minBackoff: s.MinBackoff,
		maxBackoff: s.MaxBackoff, maxRetryAfter: s.MaxRetryAfter, retries: &s.Retries}
	for i := range rms {
		rm := &rms[i]
		n := points[i]
		var rej int
		var rejMsg string
		var attempt func(context.Context) error
		if s.exp != nil {
			attempt = func(ctx context.Context) error {
				err := s.exp.Export(ctx, rm)
				if err == nil {
					return nil
				}
				if p, msg, ok := partialSuccess(err); ok {
					rej, rejMsg = p, msg
					return nil
				}
				return grpcError(err)
			}
		} else {
			body, err := proto.Marshal(exportRequest(rm))
			if err != nil {
				return out, fmt.Errorf("otlp: %w", err)
			}
			attempt = func(ctx context.Context) error {
				b, err := post(ctx, s.client, s.url, s.httpHeaders(), body, true)
				if err == nil {
					rej, rejMsg = httpPartialSuccess(b)
				}
				return err
			}
		}
		res, err := r.do(ctx, attempt)
		var re *rejectedError
		if errors.As(err, &re) {
			out.Rejected = append(out.Rejected, Rejection{Reason: re.reason, N: n, Detail: re.Error()})
			continue
		}
		o := res.outcome(n, err)
		out.Unanswered += o.Unanswered
		if err != nil {
			return out, err
		}
		if rej = min(rej, n); rej > 0 || rejMsg != "" {
			out.Rejected = append(out.Rejected, Rejection{Reason: "partial success", N: rej, Detail: rejMsg})
		}
		out.Accepted += n - rej
		if o.Duplicated > 0 {
			out.Duplicated += n - rej
		}
	}
	return out, nil
}

func (s *OTLPSink) httpHeaders() map[string]string {
	h := map[string]string{"Content-Type": "application/x-protobuf"}
	for k, v := range s.headers {
		h[k] = v
	}
	return h
}

// httpPartialSuccess reads the partial success of an OTLP/HTTP answer's
// body (an ExportMetricsServiceResponse; empty when all was accepted).
func httpPartialSuccess(b []byte) (rejected int, msg string) {
	var resp colmetricpb.ExportMetricsServiceResponse
	if len(b) == 0 || proto.Unmarshal(b, &resp) != nil || resp.PartialSuccess == nil {
		return 0, ""
	}
	ps := resp.PartialSuccess
	if ps.RejectedDataPoints == 0 && ps.ErrorMessage == "" {
		return 0, ""
	}
	return int(ps.RejectedDataPoints), "OTLP partial success: " + ps.ErrorMessage
}

// grpcError classes a failed gRPC export by its status code, as the OTLP
// specification does: retryable codes become a retryAfterError (a
// DEADLINE_EXCEEDED stays an error whose answer was lost), the others a
// rejection.
func grpcError(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err // no answer: retried, possibly stored
	}
	switch st.Code() {
	case codes.DeadlineExceeded:
		return err
	case codes.Canceled, codes.Unavailable, codes.ResourceExhausted, codes.Aborted, codes.OutOfRange, codes.DataLoss:
		return &retryAfterError{msg: err.Error()}
	}
	return &rejectedError{reason: "gRPC " + st.Code().String(), msg: err.Error()}
}

// partialSuccessRE matches the error the OTLP exporters return for a
// partial success (their internal PartialSuccess type's text).
var partialSuccessRE = regexp.MustCompile(`^OTLP partial success: (.*) \((\d+) metric data points rejected\)$`)

// partialSuccess reads the rejected count and message of a partial
// success: every error at the leaves of err's tree must be one; ok is false
// otherwise.
func partialSuccess(err error) (rejected int, msg string, ok bool) {
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			n, m, ok := partialSuccess(e)
			if !ok {
				return 0, "", false
			}
			rejected, msg = rejected+n, m
		}
		return rejected, msg, rejected > 0 || msg != ""
	case interface{ Unwrap() error }:
		return partialSuccess(u.Unwrap())
	}
	m := partialSuccessRE.FindStringSubmatch(err.Error())
	if m == nil {
		return 0, "", false
	}
	n, _ := strconv.Atoi(m[2])
	return n, "OTLP partial success: " + m[1], true
}

// Close shuts the exporter down.
func (s *OTLPSink) Close() error {
	if s.exp == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.exp.Shutdown(ctx)
}

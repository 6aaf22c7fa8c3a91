package backfill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/snappy"
	"google.golang.org/protobuf/encoding/protowire"
)

// RemoteWriteSink sends samples with Prometheus remote write 1.0 (snappy
// protobuf WriteRequest) in batches, in time order, as Prometheus's own
// remote-write client does (retrier): network errors, 5xx and 429 answers are retried
// with exponential backoff, or after the receiver's Retry-After (the same
// request, so a sample is never dropped); another 4xx answer rejects the
// batch for good (counted with the receiver's reason, and the run goes on).
// A 2xx answer is the receiver's acknowledgement: the batch is never sent
// again, whatever happens to the rest of the answer.
//
// Idempotence: a request that times out or loses its answer after the
// receiver stored it is sent again (counted as possibly duplicated). Prometheus ignores a sample equal to
// the one it holds (same series, timestamp and value), so retries and
// reruns add nothing; VictoriaMetrics stores it twice unless it runs with
// -dedup.minScrapeInterval (1ms keeps one sample per timestamp).
type RemoteWriteSink struct {
	URL     string
	Client  *http.Client
	Logger  *slog.Logger
	Headers map[string]string
	// MaxRetryTime bounds the retries of one request (default 10 minutes).
	MaxRetryTime time.Duration
	// MinBackoff and MaxBackoff bound the wait between retries; a
	// Retry-After answer waits as long as it says, up to MaxRetryAfter.
	MinBackoff, MaxBackoff time.Duration
	MaxRetryAfter          time.Duration
	// Retries counts the retried requests.
	Retries int

	buf  []byte
	comp []byte
}

// NewRemoteWriteSink returns a sink posting to url.
func NewRemoteWriteSink(url string, logger *slog.Logger) *RemoteWriteSink {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &RemoteWriteSink{URL: url, Client: &http.Client{Timeout: 30 * time.Second}, Logger: logger,
		MaxRetryTime: 10 * time.Minute, MinBackoff: 100 * time.Millisecond, MaxBackoff: 5 * time.Second, MaxRetryAfter: 5 * time.Minute}
}

// Write sends a batch as one request: one TimeSeries per series, its
// samples in time order.
func (s *RemoteWriteSink) Write(ctx context.Context, batch []Sample) (Outcome, error) {
	order := []*Series{}
	bySeries := map[*Series][]int{}
	for i := range batch {
		se := batch[i].Series
		if _, ok := bySeries[se]; !ok {
			order = append(order, se)
		}
		bySeries[se] = append(bySeries[se], i)
	}
	b := s.buf[:0]
	var ts []byte
	for _, se := range order {
		ts = ts[:0]
		for _, l := range se.Labels {
			var lb []byte
			lb = protowire.AppendTag(lb, 1, protowire.BytesType)
			lb = protowire.AppendString(lb, l.Name)
			lb = protowire.AppendTag(lb, 2, protowire.BytesType)
			lb = protowire.AppendString(lb, l.Value)
			ts = protowire.AppendTag(ts, 1, protowire.BytesType)
			ts = protowire.AppendBytes(ts, lb)
		}
		for _, i := range bySeries[se] {
			var sb []byte
			sb = protowire.AppendTag(sb, 1, protowire.Fixed64Type)
			sb = protowire.AppendFixed64(sb, math.Float64bits(batch[i].V))
			sb = protowire.AppendTag(sb, 2, protowire.VarintType)
			sb = protowire.AppendVarint(sb, uint64(batch[i].T))
			ts = protowire.AppendTag(ts, 2, protowire.BytesType)
			ts = protowire.AppendBytes(ts, sb)
		}
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, ts)
	}
	s.buf = b
	s.comp = snappy.Encode(s.comp[:cap(s.comp)], b)
	res, err := s.retrier().do(ctx, func(ctx context.Context) error {
		_, err := post(ctx, s.Client, s.URL, s.headers(), s.comp, false)
		return err
	})
	var rej *rejectedError
	if errors.As(err, &rej) {
		return Outcome{Rejected: []Rejection{{Reason: rej.reason, N: len(batch), Detail: rej.Error()}}}, nil
	}
	return res.outcome(len(batch), err), err
}

func (s *RemoteWriteSink) retrier() *retrier {
	return &retrier{what: "remote write", logger: s.Logger, maxRetryTime: s.MaxRetryTime, minBackoff: s.MinBackoff,
		maxBackoff: s.MaxBackoff, maxRetryAfter: s.MaxRetryAfter, retries: &s.Retries}
}

func (s *RemoteWriteSink) headers() map[string]string {
	h := map[string]string{
		"Content-Encoding":                  "snappy",
		"Content-Type":                      "application/x-protobuf",
		"X-Prometheus-Remote-Write-Version": "0.1.0",
	}
	for k, v := range s.Headers {
		h[k] = v
	}
	return h
}

// parseRetryAfter reads a Retry-After header: seconds or an HTTP date.
func parseRetryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	if n, err := strconv.Atoi(h); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// rejectionCause classifies a refusal by the receiver's message, and says
// what to do about the refusals Prometheus gives to old samples.
func rejectionCause(code int, msg string) (reason, hint string) {
	m := strings.ToLower(msg)
	const blocks = "or write TSDB blocks (--output tsdb:DIR) and move them into its data directory"
	switch {
	case strings.Contains(m, "out of bounds"):
		return "out of bounds", "older than the receiver's head accepts (about an hour before its newest sample): give Prometheus an out-of-order window covering the backfill (storage.tsdb.out_of_order_time_window), " + blocks
	case strings.Contains(m, "too old"):
		return "too old", "older than the receiver's out-of-order window: widen storage.tsdb.out_of_order_time_window, " + blocks
	case strings.Contains(m, "out of order"):
		return "out of order", "older than the series' newest sample in the receiver: give Prometheus an out-of-order window (storage.tsdb.out_of_order_time_window), " + blocks
	case strings.Contains(m, "duplicate sample"):
		return "duplicate sample", "the receiver holds another value at that timestamp: the series were written before with other values"
	}
	return fmt.Sprintf("HTTP %d", code), ""
}

// Close does nothing: every Write is sent when it returns.
func (s *RemoteWriteSink) Close() error { return nil }

package backfill

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"time"

	"github.com/klauspost/compress/snappy"
	"google.golang.org/protobuf/encoding/protowire"
)

// RemoteWriteSink sends samples with Prometheus remote write 1.0 (snappy
// protobuf WriteRequest) in batches, in time order. Network errors, 5xx and
// 429 answers are retried with exponential backoff (the same request, so a
// sample is never dropped); other 4xx answers stop the backfill with the
// receiver's message.
type RemoteWriteSink struct {
	URL     string
	Client  *http.Client
	Logger  *slog.Logger
	Headers map[string]string
	// MaxRetryTime bounds the retries of one request (default 10 minutes).
	MaxRetryTime time.Duration
	// MinBackoff and MaxBackoff bound the wait between retries.
	MinBackoff, MaxBackoff time.Duration
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
		MaxRetryTime: 10 * time.Minute, MinBackoff: 100 * time.Millisecond, MaxBackoff: 5 * time.Second}
}

// Write sends a batch as one request: one TimeSeries per series, its
// samples in time order.
func (s *RemoteWriteSink) Write(batch []Sample) (int, error) {
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
	return 0, s.send(s.comp)
}

// ErrRejected wraps a 4xx answer of the receiver.
var ErrRejected = errors.New("remote write rejected")

func (s *RemoteWriteSink) send(body []byte) error {
	backoff := s.MinBackoff
	deadline := time.Now().Add(s.MaxRetryTime)
	for attempt := 0; ; attempt++ {
		err := s.post(body)
		if err == nil {
			return nil
		}
		if errors.Is(err, ErrRejected) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("remote write: giving up after %d attempts: %w", attempt+1, err)
		}
		s.Retries++
		s.Logger.Warn("remote write failed, retrying", "err", err, "backoff", backoff)
		time.Sleep(backoff)
		backoff *= 2
		if backoff > s.MaxBackoff {
			backoff = s.MaxBackoff
		}
	}
}

func (s *RemoteWriteSink) post(body []byte) error {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, s.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrRejected, err)
	}
	req.Header.Set("Content-Encoding", "snappy")
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("User-Agent", "pcp-exporter")
	req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	for k, v := range s.Headers {
		req.Header.Set(k, v)
	}
	resp, err := s.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	switch {
	case resp.StatusCode/100 == 2:
		return nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode/100 == 5:
		return fmt.Errorf("%s: %s: %s", s.URL, resp.Status, bytes.TrimSpace(msg))
	default:
		return fmt.Errorf("%w: %s: %s: %s", ErrRejected, s.URL, resp.Status, bytes.TrimSpace(msg))
	}
}

// Close does nothing: every Write is sent when it returns.
func (s *RemoteWriteSink) Close() error { return nil }

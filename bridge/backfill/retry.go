package backfill

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"syscall"
	"time"
)

// retrier sends a request again as Prometheus's remote-write client does,
// for the remote-write and OTLP sinks alike: network errors, 5xx and 429
// answers are retried with exponential backoff, or after the receiver's
// Retry-After; a rejection (another 4xx) is final; ctx (SIGINT) ends it.
type retrier struct {
	what                   string // "remote write", "otlp"
	logger                 *slog.Logger
	maxRetryTime           time.Duration
	minBackoff, maxBackoff time.Duration
	maxRetryAfter          time.Duration
	retries                *int
}

// sendResult says what the sends of one request may have left in the
// receiver besides what its answer says.
type sendResult struct {
	// lost: an attempt's answer was lost after the request may have
	// reached the receiver (a timeout, a connection closed after the
	// request was written).
	lost bool
	// resent: an attempt was made after a lost one (when the request is
	// then acknowledged, the receiver may hold it twice).
	resent bool
}

// do calls attempt until it succeeds, is rejected (ErrRejected), ctx ends
// or maxRetryTime has passed.
func (r *retrier) do(ctx context.Context, attempt func(context.Context) error) (sendResult, error) {
	var res sendResult
	backoff := r.minBackoff
	deadline := time.Now().Add(r.maxRetryTime)
	for n := 0; ; n++ {
		if res.lost {
			res.resent = true
		}
		err := attempt(ctx)
		if err == nil {
			return res, nil
		}
		if errors.Is(err, ErrRejected) {
			return res, err
		}
		if answerLost(err) {
			res.lost = true
		}
		if ctx.Err() != nil {
			return res, fmt.Errorf("%s: interrupted after %d attempts: %w", r.what, n+1, ctx.Err())
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("%s: giving up after %d attempts: %w", r.what, n+1, err)
		}
		wait := backoff
		var ra *retryAfterError
		if errors.As(err, &ra) && ra.wait > 0 {
			wait = min(ra.wait, r.maxRetryAfter)
		}
		*r.retries++
		r.logger.Warn(r.what+" failed, retrying", "err", err, "wait", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return res, fmt.Errorf("%s: interrupted after %d attempts (last: %v): %w", r.what, n+1, err, ctx.Err())
		case <-t.C:
		}
		backoff = min(2*backoff, r.maxBackoff)
	}
}

// answerLost reports whether a failed attempt may have reached the
// receiver: any failure but an answer (retryAfterError, rejectedError)
// or a connection never made.
func answerLost(err error) bool {
	var ra *retryAfterError
	var op *net.OpError
	switch {
	case errors.As(err, &ra), errors.Is(err, ErrRejected), errors.Is(err, syscall.ECONNREFUSED):
		return false
	case errors.As(err, &op) && op.Op == "dial":
		return false
	}
	return true
}

// outcome turns the result of sending n samples into an Outcome.
func (res sendResult) outcome(n int, err error) Outcome {
	switch {
	case err == nil:
		o := Outcome{Accepted: n}
		if res.resent {
			o.Duplicated = n
		}
		return o
	case res.lost && !errors.Is(err, ErrRejected):
		return Outcome{Unanswered: n}
	}
	return Outcome{}
}

// ErrRejected wraps a 4xx answer of the receiver.
var ErrRejected = errors.New("remote write rejected")

// rejectedError is a 4xx answer other than 429: the batch is invalid for
// the receiver.
type rejectedError struct {
	reason string // class, for counting
	msg    string
}

func (e *rejectedError) Error() string { return e.msg }
func (e *rejectedError) Unwrap() error { return ErrRejected }

// retryAfterError is a 429 or 5xx answer, with the wait it asks for.
type retryAfterError struct {
	msg  string
	wait time.Duration // 0: none given
}

func (e *retryAfterError) Error() string { return e.msg }

// post sends one HTTP request of body with headers; a 2xx answer is nil
// (its body read, up to 64 KiB, when readBody), 429 and 5xx a
// retryAfterError, another answer a rejectedError, and a request that got
// no answer the client's error.
func post(ctx context.Context, client *http.Client, url string, headers map[string]string, body []byte, readBody bool) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, &rejectedError{reason: "bad request", msg: err.Error()}
	}
	req.Header.Set("User-Agent", "pcp-exporter")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		if !readBody {
			return nil, nil // acknowledged: the body is not waited for
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if err != nil {
			// acknowledged: only a partial success is lost
			return nil, nil
		}
		return b, nil
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	text := fmt.Sprintf("%s: %s: %s", url, resp.Status, bytes.TrimSpace(msg))
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode/100 == 5 {
		return nil, &retryAfterError{msg: text, wait: parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())}
	}
	reason, hint := rejectionCause(resp.StatusCode, string(msg))
	if hint != "" {
		text += " (" + hint + ")"
	}
	return nil, &rejectedError{reason: reason, msg: text}
}

package backfill

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/source/archive"
)

// fakeReceiver is a remote-write receiver on loopback that decodes every
// request and holds the samples of those it stores; fault decides, per
// request (numbered from 1, retries included), what it does instead.
type fakeReceiver struct {
	t     *testing.T
	srv   *httptest.Server
	fault func(n int, w http.ResponseWriter, store func()) bool // true: handled

	mu       sync.Mutex
	requests int
	stored   map[string]int // sample key -> times stored
	total    int            // samples stored, duplicates included
	times    []time.Time    // of each request
}

func newFakeReceiver(t *testing.T, fault func(n int, w http.ResponseWriter, store func()) bool) *fakeReceiver {
	r := &fakeReceiver{t: t, fault: fault, stored: map[string]int{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.CloseClientConnections)
	t.Cleanup(r.srv.Close)
	return r
}

func (r *fakeReceiver) url() string { return r.srv.URL + "/api/v1/write" }

func (r *fakeReceiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return
	}
	raw, err := snappy.Decode(nil, body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	keys, err := decodeWriteRequest(raw)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.requests++
	n := r.requests
	r.times = append(r.times, time.Now())
	r.mu.Unlock()
	store := func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, k := range keys {
			r.stored[k]++
			r.total++
		}
	}
	if r.fault != nil && r.fault(n, w, store) {
		return
	}
	store()
	w.WriteHeader(http.StatusNoContent)
}

// counts returns the distinct samples held and the samples stored.
func (r *fakeReceiver) counts() (distinct, total int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.stored), r.total
}

// decodeWriteRequest lists the samples of a WriteRequest as
// "labels|t|value" keys.
func decodeWriteRequest(b []byte) ([]string, error) {
	var keys []string
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num != 1 || typ != protowire.BytesType {
			return nil, errors.New("bad WriteRequest")
		}
		b = b[n:]
		ts, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, errors.New("bad TimeSeries")
		}
		b = b[n:]
		var labels []string
		var samples []string
		for len(ts) > 0 {
			num, _, n := protowire.ConsumeTag(ts)
			if n < 0 {
				return nil, errors.New("bad field")
			}
			ts = ts[n:]
			f, n := protowire.ConsumeBytes(ts)
			if n < 0 {
				return nil, errors.New("bad field")
			}
			ts = ts[n:]
			var a, c string
			for len(f) > 0 {
				fn, ft, n := protowire.ConsumeTag(f)
				if n < 0 {
					return nil, errors.New("bad field")
				}
				f = f[n:]
				switch ft {
				case protowire.BytesType:
					v, n := protowire.ConsumeBytes(f)
					if n < 0 {
						return nil, errors.New("bad label")
					}
					f = f[n:]
					if fn == 1 {
						a = string(v)
					} else {
						c = string(v)
					}
				case protowire.Fixed64Type:
					v, n := protowire.ConsumeFixed64(f)
					if n < 0 {
						return nil, errors.New("bad value")
					}
					f = f[n:]
					a = fmt.Sprint(math.Float64frombits(v))
				case protowire.VarintType:
					v, n := protowire.ConsumeVarint(f)
					if n < 0 {
						return nil, errors.New("bad timestamp")
					}
					f = f[n:]
					c = fmt.Sprint(int64(v))
				default:
					return nil, errors.New("bad wire type")
				}
			}
			if num == 1 {
				labels = append(labels, a+"="+c)
			} else {
				samples = append(samples, c+"|"+a)
			}
		}
		for _, s := range samples {
			keys = append(keys, strings.Join(labels, ",")+"|"+s)
		}
	}
	return keys, nil
}

// faultArchive is what the fault tests backfill: 3 full batches and a part.
const faultArchive = "live/live"

func faultSink(url string) *RemoteWriteSink {
	s := NewRemoteWriteSink(url, nil)
	s.Client.Timeout = time.Second
	s.MinBackoff = 10 * time.Millisecond
	s.MaxBackoff = 50 * time.Millisecond
	return s
}

// TestRemoteWriteFaults backfills through a receiver that answers 400,
// 429 with Retry-After, 500, hangs, closes the connection or acknowledges
// and then stalls: the counts reported are those the receiver holds, a
// refused batch is dropped and counted with its reason, and an
// acknowledged batch is never sent again.
func TestRemoteWriteFaults(t *testing.T) {
	cases := []struct {
		name  string
		fault func(n int, w http.ResponseWriter, store func()) bool
		// want: batches rejected, distinct samples held = written, total
		// stored - distinct (duplicates), an error
		rejectedBatches int
		duplicates      bool
		failFast        bool
		reason          string
		minGap          time.Duration // between request 2 and 3
		maxTook         time.Duration
	}{
		{name: "400 out of order", rejectedBatches: 1, reason: "out of order", fault: func(n int, w http.ResponseWriter, store func()) bool {
			if n == 3 {
				http.Error(w, "out of order sample", http.StatusBadRequest)
				return true
			}
			return false
		}},
		{name: "400 fail-fast", rejectedBatches: 1, failFast: true, reason: "out of bounds", fault: func(n int, w http.ResponseWriter, store func()) bool {
			if n == 3 {
				http.Error(w, "out of bounds", http.StatusBadRequest)
				return true
			}
			return false
		}},
		{name: "429 Retry-After", minGap: time.Second, fault: func(n int, w http.ResponseWriter, store func()) bool {
			if n == 2 {
				w.Header().Set("Retry-After", "1")
				http.Error(w, "slow down", http.StatusTooManyRequests)
				return true
			}
			return false
		}},
		{name: "500", fault: func(n int, w http.ResponseWriter, store func()) bool {
			if n == 2 || n == 3 {
				http.Error(w, "down", http.StatusInternalServerError)
				return true
			}
			return false
		}},
		{name: "hang after storing", duplicates: true, fault: func(n int, w http.ResponseWriter, store func()) bool {
			if n == 2 {
				store()
				time.Sleep(1500 * time.Millisecond) // past the client's timeout
				return true
			}
			return false
		}},
		{name: "close", fault: func(n int, w http.ResponseWriter, store func()) bool {
			if n == 2 {
				c, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					c.Close()
				}
				return true
			}
			return false
		}},
		{name: "ack then stall", maxTook: 700 * time.Millisecond, fault: func(n int, w http.ResponseWriter, store func()) bool {
			if n == 2 {
				store()
				w.Header().Set("Content-Length", "100")
				w.WriteHeader(http.StatusOK)
				w.(http.Flusher).Flush()
				time.Sleep(1500 * time.Millisecond) // the body never comes
				return true
			}
			return false
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rcv := newFakeReceiver(t, c.fault)
			a := openArchive(t, faultArchive)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			began := time.Now()
			st, err := Run(ctx, Options{Archives: []*archive.Archive{a}, FailFast: c.failFast}, faultSink(rcv.url()))
			took := time.Since(began)
			distinct, total := rcv.counts()
			t.Logf("%+v, receiver: %d distinct, %d stored, %d requests, %v", st, distinct, total, rcv.requests, took)
			if c.failFast != (err != nil) {
				t.Fatalf("err = %v", err)
			}
			if st.Read < 3*batchSize {
				t.Fatalf("only %d samples read: the faults are not exercised", st.Read)
			}
			if st.Written != int64(distinct) {
				t.Errorf("%d written, the receiver holds %d", st.Written, distinct)
			}
			if st.Read != st.Written+st.Rejected+st.Unsent {
				t.Errorf("read %d != written + rejected + not sent", st.Read)
			}
			if st.Rejected != int64(c.rejectedBatches*batchSize) {
				t.Errorf("%d rejected, want %d", st.Rejected, c.rejectedBatches*batchSize)
			}
			if c.reason != "" {
				if st.RejectedBy[c.reason] != st.Rejected || len(st.Errors) != 1 || !strings.Contains(st.Errors[0], "out_of_order_time_window") {
					t.Errorf("rejections %v %q, want all %q with what to do", st.RejectedBy, st.Errors, c.reason)
				}
			}
			switch {
			case c.failFast:
				if st.Written != 2*batchSize || st.Unsent != st.Read-3*batchSize {
					t.Errorf("fail-fast: %d written, %d not sent", st.Written, st.Unsent)
				}
			case c.rejectedBatches == 0 && st.Written != st.Read:
				t.Errorf("%d written of %d read", st.Written, st.Read)
			}
			if dup := total - distinct; c.duplicates != (dup > 0) || dup > batchSize {
				t.Errorf("%d samples stored twice", dup)
			}
			if c.maxTook > 0 && took > c.maxTook {
				t.Errorf("took %v: the acknowledged request's body was waited for", took)
			}
			if c.minGap > 0 {
				if gap := rcv.times[2].Sub(rcv.times[1]); gap < c.minGap {
					t.Errorf("retried after %v, want the Retry-After's %v", gap, c.minGap)
				}
			}
		})
	}
}

// TestRemoteWriteCancel interrupts a backfill whose receiver keeps
// failing (retries with the server's Retry-After of an hour) or hangs:
// Run returns within a second and counts what the receiver holds.
func TestRemoteWriteCancel(t *testing.T) {
	for _, mode := range []string{"retry-after", "hang"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			release := make(chan struct{})
			defer close(release)
			rcv := newFakeReceiver(t, func(n int, w http.ResponseWriter, store func()) bool {
				if n < 3 {
					return false
				}
				if mode == "hang" {
					select {
					case <-release:
					case <-time.After(10 * time.Second):
					}
					return true
				}
				w.Header().Set("Retry-After", "3600")
				http.Error(w, "overloaded", http.StatusServiceUnavailable)
				return true
			})
			a := openArchive(t, faultArchive)
			sink := faultSink(rcv.url())
			sink.Client.Timeout = time.Minute
			ctx, cancel := context.WithCancel(context.Background())
			var at time.Time
			go func() {
				for {
					rcv.mu.Lock()
					n := rcv.requests
					rcv.mu.Unlock()
					if n >= 3 {
						time.Sleep(100 * time.Millisecond)
						at = time.Now()
						cancel()
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
			}()
			st, err := Run(ctx, Options{Archives: []*archive.Archive{a}}, sink)
			took := time.Since(at)
			if !errors.Is(err, context.Canceled) {
				t.Errorf("err = %v, want context canceled", err)
			}
			if took > time.Second {
				t.Errorf("Run returned %v after the cancel", took)
			}
			distinct, _ := rcv.counts()
			if st.Written != int64(distinct) || st.Written != 2*batchSize || st.Unsent != st.Read-st.Written {
				t.Errorf("%+v: the receiver holds %d", st, distinct)
			}
		})
	}
}

// TestRemoteWriteRealPrometheusRefuses backfills 2024 data into a real
// Prometheus without an out-of-order window that already holds a recent
// sample: every batch is refused as out of bounds, counted with the
// cause and what to do, and the receiver holds none of them.
func TestRemoteWriteRealPrometheusRefuses(t *testing.T) {
	base := e2e.StartPrometheus(t, "global: {}\n", "", "--web.enable-remote-write-receiver")
	// a recent sample moves the head past 2024
	now := &Series{Labels: labelPairs("__name__", "recent", "job", "x"), ID: 0}
	if _, err := NewRemoteWriteSink(base+"/api/v1/write", nil).Write(context.Background(), []Sample{{Series: now, T: time.Now().UnixMilli(), V: 1}}); err != nil {
		t.Fatal(err)
	}
	a := openArchive(t, "indoms/indoms")
	st, err := Run(context.Background(), Options{Archives: []*archive.Archive{a}}, NewRemoteWriteSink(base+"/api/v1/write", nil))
	if err != nil {
		t.Fatal(err)
	}
	if st.Written != 0 || st.Rejected != st.Read || st.RejectedBy["out of bounds"] != st.Read || len(st.Errors) != 1 || !strings.Contains(st.Errors[0], "tsdb:DIR") {
		t.Errorf("stats %+v", st)
	}
	if got := storedRaw(t, base, promNames(t, a), time.Now()); len(got) != 0 {
		t.Errorf("Prometheus holds %d samples", len(got))
	}
}

func labelPairs(kv ...string) []mapping.LabelPair {
	var out []mapping.LabelPair
	for i := 0; i < len(kv); i += 2 {
		out = append(out, mapping.LabelPair{Name: kv[i], Value: kv[i+1]})
	}
	return out
}

// TestOTLPPartialSuccess exports through the OTLP HTTP exporter to a
// receiver that answers every request with a partial success rejecting 7
// data points: they are counted as rejected, with the receiver's message.
func TestOTLPPartialSuccess(t *testing.T) {
	var mu sync.Mutex
	requests := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		requests++
		mu.Unlock()
		var ps []byte
		ps = protowire.AppendTag(ps, 1, protowire.VarintType)
		ps = protowire.AppendVarint(ps, 7)
		ps = protowire.AppendTag(ps, 2, protowire.BytesType)
		ps = protowire.AppendString(ps, "7 points too old")
		var resp []byte
		resp = protowire.AppendTag(resp, 1, protowire.BytesType)
		resp = protowire.AppendBytes(resp, ps)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(resp)
	}))
	defer srv.Close()
	exp, err := otlpmetrichttp.New(context.Background(), otlpmetrichttp.WithEndpointURL(srv.URL+"/v1/metrics"), otlpmetrichttp.WithRetry(otlpmetrichttp.RetryConfig{Enabled: false}))
	if err != nil {
		t.Fatal(err)
	}
	a := openArchive(t, "seedtables/seedtables")
	st, err := Run(context.Background(), Options{Archives: []*archive.Archive{a}}, NewOTLPSink(exp))
	if err != nil {
		t.Fatal(err)
	}
	if requests == 0 || st.Rejected != int64(7*requests) || st.Written != st.Read-st.Rejected || st.RejectedBy["partial success"] != st.Rejected ||
		len(st.Errors) != 1 || !strings.Contains(st.Errors[0], "7 points too old") {
		t.Errorf("%d requests: %+v", requests, st)
	}
}

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
	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

// fakeReceiver is a remote-write receiver on loopback that decodes every
// request and holds the samples of those it stores; fault decides, per
// request (numbered from 1, retries included), what it does instead.
type fakeReceiver struct {
	t      *testing.T
	srv    *httptest.Server
	fault  func(n int, w http.ResponseWriter, store func()) bool // true: handled
	decode func(body []byte) ([]string, error)                   // the samples of a request
	path   string

	mu       sync.Mutex
	requests int
	stored   map[string]int // sample key -> times stored
	total    int            // samples stored, duplicates included
	times    []time.Time    // of each request
}

func newFakeReceiver(t *testing.T, fault func(n int, w http.ResponseWriter, store func()) bool) *fakeReceiver {
	return startReceiver(t, &fakeReceiver{t: t, fault: fault, stored: map[string]int{}, path: "/api/v1/write", decode: func(body []byte) ([]string, error) {
		raw, err := snappy.Decode(nil, body)
		if err != nil {
			return nil, err
		}
		return decodeWriteRequest(raw)
	}})
}

// newOTLPReceiver is newFakeReceiver for OTLP/HTTP protobuf requests.
func newOTLPReceiver(t *testing.T, fault func(n int, w http.ResponseWriter, store func()) bool) *fakeReceiver {
	return startReceiver(t, &fakeReceiver{t: t, fault: fault, stored: map[string]int{}, path: "/v1/metrics", decode: decodeOTLPRequest})
}

func startReceiver(t *testing.T, r *fakeReceiver) *fakeReceiver {
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.CloseClientConnections)
	t.Cleanup(r.srv.Close)
	return r
}

func (r *fakeReceiver) url() string { return r.srv.URL + r.path }

func (r *fakeReceiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return
	}
	keys, err := r.decode(body)
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
	if r.path == "/v1/metrics" {
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK) // an empty ExportMetricsServiceResponse
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// decodeOTLPRequest lists the data points of an ExportMetricsServiceRequest
// as "resource|metric|attributes|t|value" keys.
func decodeOTLPRequest(body []byte) ([]string, error) {
	var req colmetricpb.ExportMetricsServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	var keys []string
	for _, rm := range req.ResourceMetrics {
		res := fmt.Sprint(rm.GetResource().GetAttributes())
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				dps := m.GetGauge().GetDataPoints()
				if m.GetSum() != nil {
					dps = m.GetSum().GetDataPoints()
				}
				for _, dp := range dps {
					keys = append(keys, fmt.Sprintf("%s|%s|%v|%d|%v", res, m.Name, dp.Attributes, dp.TimeUnixNano, dp.GetAsDouble()))
				}
			}
		}
	}
	return keys, nil
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

func faultOTLPSink(url string, timeout time.Duration) *OTLPSink {
	s := NewOTLPHTTPSink(url, &http.Client{Timeout: timeout}, nil, nil)
	s.MinBackoff = 10 * time.Millisecond
	s.MaxBackoff = 50 * time.Millisecond
	return s
}

// sinkKinds are the HTTP sinks the fault tests run: each with its fake
// receiver and a sink with the given client timeout.
var sinkKinds = []struct {
	name     string
	receiver func(*testing.T, func(int, http.ResponseWriter, func()) bool) *fakeReceiver
	sink     func(url string, timeout time.Duration) Sink
}{
	{"remote write", newFakeReceiver, func(url string, timeout time.Duration) Sink {
		s := faultSink(url)
		s.Client.Timeout = timeout
		return s
	}},
	{"otlp", newOTLPReceiver, func(url string, timeout time.Duration) Sink { return faultOTLPSink(url, timeout) }},
}

// TestRemoteWriteFaults backfills through a receiver (remote write, and
// OTLP/HTTP) that answers 400, 429 with Retry-After, 500, hangs, closes the
// connection or (remote write) acknowledges and then stalls: the counts
// reported are those the receiver holds, a refused batch is dropped and
// counted with its reason, an acknowledged batch is never sent again, and
// one resent after a lost answer is counted as possibly duplicated.
func TestRemoteWriteFaults(t *testing.T) {
	t.Parallel()
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
		rwOnly          bool // OTLP reads the body of an answer (a partial success)
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
				time.Sleep(3 * time.Second) // past the client's timeout
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
		{name: "ack then stall", maxTook: 1900 * time.Millisecond, rwOnly: true, fault: func(n int, w http.ResponseWriter, store func()) bool {
			if n == 2 {
				store()
				w.Header().Set("Content-Length", "100")
				w.WriteHeader(http.StatusOK)
				w.(http.Flusher).Flush()
				time.Sleep(5 * time.Second) // the body never comes
				return true
			}
			return false
		}},
	}
	// faultTimeout is the sinks' request timeout: 2 s, so that only the
	// faults (which hang for longer) outlast it, even under the race
	// detector on a loaded machine (1 s did not)
	const faultTimeout = 2 * time.Second
	for _, kind := range sinkKinds {
		for _, c := range cases {
			if c.rwOnly && kind.name != "remote write" {
				continue
			}
			t.Run(kind.name+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				rcv := kind.receiver(t, c.fault)
				a := openArchive(t, faultArchive)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				began := time.Now()
				st, err := Run(ctx, Options{Archives: []*pcplog.Archive{a}, FailFast: c.failFast}, kind.sink(rcv.url(), faultTimeout))
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
				if st.Read != st.Written+st.Rejected+st.Unsent+st.Unanswered {
					t.Errorf("read %d != written + rejected + not sent + unanswered", st.Read)
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
				// a request that outlasts the 1 s timeout on a loaded
				// machine is sent again too: more duplicates than the
				// fault's batch are right as long as the summary counts
				// every one (a timed-out request the receiver had not
				// stored yet is counted too: "possibly duplicated")
				if dup := total - distinct; c.duplicates && dup == 0 {
					t.Errorf("no sample stored twice: the fault is not exercised")
				} else if dup > int(st.Duplicated) {
					t.Errorf("the receiver holds %d samples twice, the summary says %d possibly duplicated", dup, st.Duplicated)
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
}

// TestRemoteWriteCancel interrupts a backfill (remote write, and OTLP/HTTP)
// whose receiver keeps failing (retries with the server's Retry-After of
// an hour), hangs, or stores the batch and then hangs: Run returns within
// a second, what the receiver holds is what was written plus, at most,
// what the summary says was sent without an answer.
func TestRemoteWriteCancel(t *testing.T) {
	for _, kind := range sinkKinds {
		for _, mode := range []string{"retry-after", "hang", "hang after storing"} {
			t.Run(kind.name+"/"+mode, func(t *testing.T) {
				t.Parallel()
				release := make(chan struct{})
				defer close(release)
				rcv := kind.receiver(t, func(n int, w http.ResponseWriter, store func()) bool {
					if n < 3 {
						return false
					}
					if mode == "retry-after" {
						w.Header().Set("Retry-After", "3600")
						http.Error(w, "overloaded", http.StatusServiceUnavailable)
						return true
					}
					if mode == "hang after storing" {
						store()
					}
					select {
					case <-release:
					case <-time.After(10 * time.Second):
					}
					return true
				})
				a := openArchive(t, faultArchive)
				sink := kind.sink(rcv.url(), time.Minute)
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
				st, err := Run(ctx, Options{Archives: []*pcplog.Archive{a}}, sink)
				took := time.Since(at)
				if !errors.Is(err, context.Canceled) {
					t.Errorf("err = %v, want context canceled", err)
				}
				if took > time.Second {
					t.Errorf("Run returned %v after the cancel", took)
				}
				distinct, _ := rcv.counts()
				wantUnanswered, held := int64(0), int64(0)
				switch mode {
				case "hang":
					wantUnanswered = batchSize
				case "hang after storing":
					wantUnanswered, held = batchSize, batchSize
				}
				if st.Written != 2*batchSize || st.Written+held != int64(distinct) || st.Unanswered != wantUnanswered ||
					st.Unsent != st.Read-st.Written-st.Unanswered {
					t.Errorf("%+v: the receiver holds %d, want %d written and %d unanswered", st, distinct, 2*batchSize, wantUnanswered)
				}
			})
		}
	}
}

// TestRemoteWriteRealPrometheusRefuses backfills 2024 data into a real
// Prometheus without an out-of-order window that already holds a recent
// sample: every batch is refused as out of bounds, counted with the
// cause and what to do, and the receiver holds none of them.
func TestRemoteWriteRealPrometheusRefuses(t *testing.T) {
	t.Parallel()
	base := e2e.StartPrometheus(t, "global: {}\n", "", "--web.enable-remote-write-receiver")
	// a recent sample moves the head past 2024
	now := &Series{Labels: labelPairs("__name__", "recent", "job", "x"), ID: 0}
	if _, err := NewRemoteWriteSink(base+"/api/v1/write", nil).Write(context.Background(), []Sample{{Series: now, T: time.Now().UnixMilli(), V: 1}}); err != nil {
		t.Fatal(err)
	}
	a := openArchive(t, "indoms/indoms")
	st, err := Run(context.Background(), Options{Archives: []*pcplog.Archive{a}}, NewRemoteWriteSink(base+"/api/v1/write", nil))
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
	st, err := Run(context.Background(), Options{Archives: []*pcplog.Archive{a}}, NewOTLPSink(exp, nil))
	if err != nil {
		t.Fatal(err)
	}
	if requests == 0 || st.Rejected != int64(7*requests) || st.Written != st.Read-st.Rejected || st.RejectedBy["partial success"] != st.Rejected ||
		len(st.Errors) != 1 || !strings.Contains(st.Errors[0], "7 points too old") {
		t.Errorf("%d requests: %+v", requests, st)
	}
}

package pmcd

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/pcp-exporter/pcp-exporter/bridge"
	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

var fakePMIDs = []semantics.PMID{fakeA, fakeB}

const testTimeout = 300 * time.Millisecond

func openFake(t *testing.T, f *fakePMCD) *Source {
	t.Helper()
	s, err := Open(f.addr(), Options{Timeout: testTimeout, MetadataTimeout: time.Second, Backoff: []time.Duration{time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestFakeGood(t *testing.T) {
	f := newFake(t)
	s := openFake(t, f)
	ms := s.Metrics()
	if len(ms) != 2 || ms[0].Name != "fake.a" || ms[1].Desc.PMID != fakeB || ms[0].OneLine != "help" {
		t.Fatalf("metrics %+v", ms)
	}
	var res source.Result
	if err := s.Fetch(time.Now(), fakePMIDs, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Sets) != 2 || len(res.Sets[1].Values) != 1 || res.Sets[1].Values[0].Value.Uint64() != 42 || !res.Time.Equal(time.Unix(1, 7)) {
		t.Fatalf("result %+v", res)
	}
}

// TestHandshakeFaults: a pmcd that refuses, wants TLS or credentials,
// sends garbage or nothing gives one clear error, in time.
func TestHandshakeFaults(t *testing.T) {
	cases := []struct {
		name     string
		greeting func(c net.Conn) bool
		want     string
	}{
		{"silent", func(c net.Conn) bool { time.Sleep(2 * testTimeout); return false }, "no greeting within"},
		{"truncated", func(c net.Conn) bool { c.Write(be(20, pduError)[:7]); return false }, "closed within a PDU header"},
		{"refused", func(c net.Conn) bool { c.Write(mkpdu(pduError, be(uint32(0xfffffbee), 0))); return false }, "refused the connection: No permission to perform requested operation"},
		{"creds required", func(c net.Conn) bool { c.Write(mkpdu(pduError, be(0, 2<<24|featCredsReqd|featAuth))); return true }, "requires authentication this client is not configured for"},
		{"not an error pdu", func(c net.Conn) bool { c.Write(mkpdu(pduDesc, be(1, 2, 3, 4, 5))); return false }, "DESC at byte 0: greeting of 32 bytes"},
		{"bad version", func(c net.Conn) bool { c.Write(mkpdu(pduError, be(0, 7<<24))); return false }, "protocol version 7"},
		{"huge length", func(c net.Conn) bool { c.Write(be(0x7fffffff, pduError, 0)); return false }, "length 2147483647 outside"},
		{"sasl", func(c net.Conn) bool {
			c.Write(mkpdu(pduError, be(0, 2<<24|featHighres)))
			c.Write(mkpdu(pduAttr, []byte("PLAIN")))
			return false
		}, "requires authentication this client is not configured for"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(f *fakePMCD) { f.greeting = tc.greeting })
			start := time.Now()
			_, err := Open(f.addr(), Options{Timeout: testTimeout})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), f.addr()) {
				t.Fatalf("error %v, want one naming %s and saying %q", err, f.addr(), tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error of several lines: %q", err)
			}
			if d := time.Since(start); d > 4*testTimeout {
				t.Errorf("took %v", d)
			}
		})
	}
}

// TestFetchFaults: truncated, oversized, malformed, endless or missing
// fetch replies make the source down with a clear error, in time and with
// memory bounded by what was received; the next fetch reconnects.
func TestFetchFaults(t *testing.T) {
	result := goodResult([]uint32{fakeA, fakeB})
	patch := func(off int, w uint32) []byte {
		b := append([]byte(nil), result...)
		copy(b[off:], be(w))
		return b
	}
	send := func(b []byte) func(c net.Conn, _ []uint32) bool {
		return func(c net.Conn, _ []uint32) bool { c.Write(b); return true }
	}
	cases := []struct {
		name  string
		fetch func(c net.Conn, pmids []uint32) bool
		want  string
	}{
		{"never answers", func(net.Conn, []uint32) bool { return true }, "no answer in time"},
		{"closes", func(net.Conn, []uint32) bool { return false }, "EOF"},
		{"truncated", func(c net.Conn, _ []uint32) bool { c.Write(result[:len(result)-5]); return false }, "HIGHRES_RESULT truncated at byte 91 of 96"},
		{"oversized", send(be(1<<30, pduHighresResult, 0)), "HIGHRES_RESULT at byte 0: length 1073741824 outside [12, 16777216]"},
		{"numpmid", send(patch(12, 3)), "HIGHRES_RESULT at byte 12: numpmid 3 for 2 metrics"},
		{"wrong pmid", send(patch(32, 7)), "HIGHRES_RESULT at byte 32: value set 0 is of 0.0.7, 60.0.1 was asked for"},
		{"numval", send(patch(36, 1000)), "numval 1000 of 60.0.1 does not fit"},
		{"valfmt", send(patch(40, 9)), "HIGHRES_RESULT at byte 40: unknown value format 9"},
		{"offset", send(patch(48, 1000)), "HIGHRES_RESULT at byte 48: value block offset 4000 of 60.0.1 outside the PDU"},
		{"vlen", send(patch(72-24, 0)), "HIGHRES_RESULT at byte 48"},
		{"block length", send(patch(72, 3<<24|200)), "HIGHRES_RESULT at byte 72: value block length 200 of 60.0.1 outside the PDU"},
		{"short block", send(patch(72, 3<<24|8)), "value block of 4 bytes too short for type u64"},
		{"wrong type", send(mkpdu(pduDescs, be(0))), "DESCS at byte 4: unexpected reply to HIGHRES_FETCH"},
		{"error pdu of 24 bytes", send(mkpdu(pduError, be(1, 2, 3))), "ERROR at byte 0: length 24, want 16 or 20"},
		{"endless flags", func(c net.Conn, _ []uint32) bool {
			for {
				if _, err := c.Write(mkpdu(pduError, be(pmcdLabelChange))); err != nil {
					return false
				}
			}
		}, "no answer in time"},
		{"endless pdu", func(c net.Conn, _ []uint32) bool {
			c.Write(be(16<<20, pduHighresResult, 0))
			chunk := make([]byte, 64<<10)
			for {
				if _, err := c.Write(chunk); err != nil {
					return false
				}
				time.Sleep(5 * time.Millisecond)
			}
		}, "no answer in time"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			// a reconnection made while the fault lasts reads the metadata
			// with a fetch (profile.go) that the fault stalls: for the fetch
			// timeout only (TestMetadataFetchesHaveTheFetchTimeout), so the next
			// attempt finds pmcd behaving again
			s, err := New(f.addr(), Options{Timeout: testTimeout, MaxPDU: 16 << 20, Backoff: []time.Duration{time.Millisecond}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.Connect(); err != nil {
				t.Fatal(err)
			}
			f.setFetch(tc.fetch)
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			var res source.Result
			start := time.Now()
			if err := s.Fetch(time.Now(), fakePMIDs, &res); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > testTimeout+time.Second {
				t.Errorf("fetch took %v", d)
			}
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			if grown := after.TotalAlloc - before.TotalAlloc; grown > 64<<20 {
				t.Errorf("fetch allocated %d bytes", grown)
			}
			for _, set := range res.Sets {
				if !errors.Is(set.Err, ErrNotConnected) {
					t.Errorf("set %v: error %v, want ErrNotConnected", set.PMID, set.Err)
				}
			}
			st := s.Status(time.Now())
			if st.Reason != source.ReasonDown || !strings.Contains(st.Detail, tc.want) || !strings.Contains(st.Detail, f.addr()) {
				t.Fatalf("status %+v, want down saying %q", st, tc.want)
			}
			// pmcd behaves again: the source comes back by itself
			f.setFetch(nil)
			waitUp(t, s)
			if err := s.Fetch(time.Now(), fakePMIDs, &res); err != nil {
				t.Fatal(err)
			}
			if st := s.Status(time.Now()); st.Reason != source.ReasonUp || res.Sets[0].Err != nil {
				t.Fatalf("after recovery: status %+v, set %+v", st, res.Sets[0])
			}
		})
	}
}

// TestFlagsRefreshMetadata: an ERROR with PMCD_AGENT_CHANGE before a
// result makes the metadata read again before the next scrape, once.
func TestFlagsRefreshMetadata(t *testing.T) {
	f := newFake(t)
	s := openFake(t, f)
	e0 := s.Epoch()
	s.Metrics()
	if s.Epoch() != e0 {
		t.Fatal("metadata read again with no change flagged")
	}
	f.setFetch(func(c net.Conn, pmids []uint32) bool {
		c.Write(mkpdu(pduError, be(pmcdAgentChange)))
		c.Write(goodResult(pmids))
		return true
	})
	var res source.Result
	if err := s.Fetch(time.Now(), fakePMIDs, &res); err != nil || res.Sets[0].Err != nil {
		t.Fatalf("fetch with flags: %v %+v", err, res.Sets)
	}
	f.setFetch(nil)
	s.Metrics() // starts the read
	waitFor(t, "the metadata read again", func() bool { return s.Epoch() == e0+1 })
	s.Metrics()
	time.Sleep(50 * time.Millisecond)
	if s.Epoch() != e0+1 {
		t.Fatal("metadata read again twice")
	}
}

// TestLabelChangeReadsLabelsOnly: a label change alone flagged by pmcd
// reads only the labels again (no namespace, descriptor, help or instance
// request), and the metrics carry the new labels with their help kept.
func TestLabelChangeReadsLabelsOnly(t *testing.T) {
	f := newFake(t, func(f *fakePMCD) { f.itemLabels = `{"n":"1"}` })
	s := openFake(t, f)
	label := func() string {
		ms := s.Metrics()
		if len(ms) != 2 || ms[0].OneLine != "help" || ms[0].Help != "help" {
			t.Fatalf("metrics %+v", ms)
		}
		return fmt.Sprint(ms[0].Labels)
	}
	if l := label(); !strings.Contains(l, `n:"1"`) && !strings.Contains(l, `"1"`) {
		t.Fatalf("labels %s", l)
	}
	before := label()
	e0 := s.Epoch()
	f.setItemLabels(`{"n":"2"}`)
	f.setFetch(func(c net.Conn, pmids []uint32) bool {
		c.Write(mkpdu(pduError, be(pmcdLabelChange)))
		c.Write(goodResult(pmids))
		return true
	})
	var res source.Result
	if err := s.Fetch(time.Now(), fakePMIDs, &res); err != nil || res.Sets[0].Err != nil {
		t.Fatalf("fetch with flags: %v %+v", err, res.Sets)
	}
	f.setFetch(nil)
	r0 := f.requests()
	s.Metrics() // starts the read
	waitFor(t, "labels read again", func() bool { return s.Epoch() == e0+1 })
	r1 := f.requests()
	for _, typ := range []uint32{pduPMNSTraverse, pduDescIDs, pduTextReq, pduInstanceReq} {
		if r1[typ] != r0[typ] {
			t.Errorf("%d %s requests for a label change", r1[typ]-r0[typ], pduName(typ))
		}
	}
	if r1[pduLabelReq] == r0[pduLabelReq] {
		t.Error("no LABEL request for a label change")
	}
	if after := label(); after == before || !strings.Contains(after, `"2"`) {
		t.Errorf("labels %s, then %s", before, after)
	}
}

// TestLabelReadAfterReconnectReadsAll: when the connection is lost while
// only the labels are read again, pmcd may have restarted with other
// metrics: everything is read again.
func TestLabelReadAfterReconnectReadsAll(t *testing.T) {
	f := newFake(t, func(f *fakePMCD) { f.itemLabels = `{"n":"1"}` })
	s := openFake(t, f)
	release := f.stallMetadata(pduLabelReq)
	f.setFetch(func(c net.Conn, pmids []uint32) bool {
		c.Write(mkpdu(pduError, be(pmcdLabelChange)))
		c.Write(goodResult(pmids))
		return true
	})
	var res source.Result
	s.Fetch(time.Now(), fakePMIDs, &res)
	s.Metrics() // starts reading the labels: stalled
	f.setFetch(func(net.Conn, []uint32) bool { return false })
	s.Fetch(time.Now(), fakePMIDs, &res) // the connection is lost
	if st := s.Status(time.Now()); st.Reason != source.ReasonDown {
		t.Fatalf("status %+v after a lost connection", st)
	}
	f.mu.Lock()
	f.prefix = "new" // pmcd "restarted" with other names
	f.mu.Unlock()
	f.setFetch(nil)
	release()
	waitUp(t, s)
	if ms := s.Metrics(); len(ms) != 2 || ms[0].Name != "new.a" {
		t.Fatalf("metrics after reconnecting %+v, want new.a and new.b", ms)
	}
}

// waitFor waits (at most 30 s) until ok.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); !ok(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("no %s in 30 s", what)
		}
	}
}

// waitUp waits until the source has reconnected (in the background).
func waitUp(t *testing.T, s *Source) {
	t.Helper()
	waitFor(t, "reconnection", func() bool { s.Metrics(); return s.Status(time.Now()).Reason == source.ReasonUp })
}

// TestScrapeNeverWaitsOnMetadata: pmcd flags a change and then stalls the
// metadata read (or the connection drops and the new one stalls): every
// scrape still answers within the fetch deadline, not MetadataTimeout,
// with the previous metadata (or the source down) until the read is done.
func TestScrapeNeverWaitsOnMetadata(t *testing.T) {
	f := newFake(t)
	s, err := Open(f.addr(), Options{Timeout: testTimeout, MetadataTimeout: time.Minute, Backoff: []time.Duration{time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	m, err := mapping.New(nil, mapping.Options{})
	if err != nil {
		t.Fatal(err)
	}
	col := bridge.New(m, nil, bridge.Source{Name: "fake", Src: s})
	scrape := func(want, wantSelf string) {
		t.Helper()
		var out, self bytes.Buffer
		start := time.Now()
		if err := col.WriteText(&out); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > testTimeout+100*time.Millisecond {
			t.Errorf("scrape took %v, more than the fetch deadline %v", d, testTimeout)
		}
		writeSelf(t, col, &self)
		if !strings.Contains(out.String(), want) || !strings.Contains(self.String(), wantSelf) {
			t.Fatalf("scrape lacks %q or %q:\n%s%s", want, wantSelf, out.String(), self.String())
		}
	}
	up := `pcp_exporter_source_up{reason="",source="fake"} 1`
	scrape("fake_a_total", up)
	e0 := s.Epoch()
	release := f.stallMetadata(pduPMNSTraverse)
	f.setFetch(func(c net.Conn, pmids []uint32) bool {
		c.Write(mkpdu(pduError, be(pmcdAgentChange)))
		c.Write(goodResult(pmids))
		return true
	})
	scrape("fake_a_total", up) // flagged
	f.setFetch(nil)
	for i := 0; i < 3; i++ {
		scrape("fake_a_total", up) // the read stalls: the previous metadata
	}
	if s.Epoch() != e0 {
		t.Fatal("metadata changed while its read stalled")
	}
	release()
	waitFor(t, "metadata read again", func() bool { return s.Epoch() == e0+1 })
	scrape("fake_a_total", up)

	// the connection drops, and reading the metadata on the new one stalls
	release = f.stallMetadata(pduPMNSTraverse)
	f.setFetch(func(net.Conn, []uint32) bool { return false })
	scrape("", `pcp_exporter_source_up{reason="down",source="fake"} 0`)
	f.setFetch(nil)
	for i := 0; i < 3; i++ {
		scrape("", `pcp_exporter_source_up{reason="down",source="fake"} 0`)
	}
	release()
	waitUp(t, s)
	scrape("fake_a_total", up)
}

// TestScrapeWithHungPMCD: a pmcd that stops answering costs a scrape at
// most the fetch deadline; the scrape reports the source down and still
// serves the other sources.
func TestScrapeWithHungPMCD(t *testing.T) {
	good, hung := newFake(t), newFake(t, func(f *fakePMCD) { f.prefix = "other" })
	a, b := openFake(t, good), openFake(t, hung)
	var logs bytes.Buffer
	m, err := mapping.New(nil, mapping.Options{})
	if err != nil {
		t.Fatal(err)
	}
	col := bridge.New(m, slog.New(slog.NewTextHandler(&logs, nil)), bridge.Source{Name: "good", Src: a}, bridge.Source{Name: "hung", Src: b})
	hung.setFetch(func(net.Conn, []uint32) bool { return true })
	for i := 0; i < 3; i++ {
		var out bytes.Buffer
		start := time.Now()
		if err := col.WriteText(&out); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > testTimeout+time.Second {
			t.Errorf("scrape took %v", d)
		}
		if !strings.Contains(out.String(), "fake_a_total") {
			t.Fatalf("scrape lost the good source:\n%s", out.String())
		}
	}
	var self bytes.Buffer
	writeSelf(t, col, &self)
	if !strings.Contains(self.String(), `pcp_exporter_source_up{reason="down",source="hung"} 0`) {
		t.Errorf("self-metrics:\n%s", self.String())
	}
	if n := strings.Count(logs.String(), "PCP source is down"); n != 1 {
		t.Errorf("%d log lines for one change of state:\n%s", n, logs.String())
	}
}

func writeSelf(t *testing.T, col *bridge.Collector, w io.Writer) {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(col.Self())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		expfmt.MetricFamilyToText(w, mf)
	}
}

// TestNewInstancesReadAgain: a value of an instance not known yet makes
// the instance domain read again (pmcd flags no instance change).
func TestNewInstancesReadAgain(t *testing.T) {
	f := newFake(t, func(f *fakePMCD) { f.insts = []string{"zero"} })
	s := openFake(t, f)
	in := semantics.NewInDom(60, 1)
	if got := s.Instances(in); len(got) != 1 || got[0].Name != "zero" {
		t.Fatalf("instances %+v", got)
	}
	f.setInsts("zero", "one")
	// a result with instances 0 and 1 of fake.a
	sets := be(1, 0, 1, 0, 7, fakeA, 2, semantics.ValInsitu, 0, 5, 1, 6)
	reply := mkpdu(pduHighresResult, sets)
	f.setFetch(func(c net.Conn, _ []uint32) bool { c.Write(reply); return true })
	var res source.Result
	if err := s.Fetch(time.Now(), fakePMIDs[:1], &res); err != nil || len(res.Sets[0].Values) != 2 {
		t.Fatalf("fetch: %v %+v", err, res.Sets)
	}
	if got := s.Instances(in); len(got) != 2 || got[1].Name != "one" {
		t.Fatalf("instances after a new one appeared: %+v", got)
	}
}

// TestConnectByStalledMetadata: a pmcd that answers the handshake but
// stalls its metadata holds ConnectBy (serve's start) only until the
// deadline; the source is down meanwhile and up once the read completes.
func TestConnectByStalledMetadata(t *testing.T) {
	f := newFake(t)
	release := f.stallMetadata(pduPMNSTraverse)
	s, err := New(f.addr(), Options{Timeout: testTimeout, MetadataTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	start := time.Now()
	err = s.ConnectBy(start.Add(200 * time.Millisecond))
	if d := time.Since(start); d > 200*time.Millisecond+100*time.Millisecond {
		t.Errorf("ConnectBy returned after %v, deadline 200ms", d)
	}
	if err == nil || !strings.Contains(err.Error(), "still reading its metadata") {
		t.Fatalf("ConnectBy = %v, want a still-reading error", err)
	}
	if st := s.Status(time.Now()); st.Reason != source.ReasonDown {
		t.Errorf("status while reading = %+v, want down", st)
	}
	release()
	if err := s.ConnectBy(time.Now().Add(time.Minute)); err != nil {
		t.Fatalf("ConnectBy after the release = %v", err)
	}
	waitUp(t, s)
}

// TestMetadataFetchesHaveTheFetchTimeout: the fetches a metadata read
// makes, before asking for instance labels (profile.go) and for pmcd's
// start (readStarts, the first fetch when there are no instances), are
// bounded by the fetch timeout, not by the metadata's: a pmcd that answers
// everything but fetches fails the read in about Timeout, with the error a
// scrape's fetch gets, rather than holding the source down for
// MetadataTimeout. (The starts' fetch had the metadata's minute: a
// reconnection that reached it while pmcd did not answer stayed down.)
func TestMetadataFetchesHaveTheFetchTimeout(t *testing.T) {
	for _, tc := range []struct {
		name  string
		insts []string
	}{
		{"prime fetch", []string{"a", "b"}}, // instance labels, so a prime fetch
		{"starts fetch", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(f *fakePMCD) {
				f.insts = tc.insts
				f.fetch = func(net.Conn, []uint32) bool { return true }
			})
			s, err := New(f.addr(), Options{Timeout: testTimeout, MetadataTimeout: 20 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			start := time.Now()
			err = s.Connect()
			d := time.Since(start)
			if err == nil || !strings.Contains(err.Error(), "no answer in time") {
				t.Errorf("Connect: %v, want no answer in time", err)
			}
			if d > testTimeout+2*time.Second {
				t.Errorf("the metadata read failed after %v: its fetch waited past the fetch timeout (%v)", d, testTimeout)
			}
			if n := f.requests()[pduHighresFetch]; n != 1 {
				t.Errorf("%d fetches made, want 1", n)
			}
		})
	}
}

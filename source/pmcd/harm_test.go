package pmcd

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/bridge"
	"github.com/pcp-exporter/pcp-exporter/internal/longtest"
	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// Fake-pmcd tests of what a faulty pmcd must not do to the source: take
// it down for one bad label, grow its memory past what it serves, or make
// it reconnect, read the metadata again or log at every scrape.

// logBuf is a log destination safe for the source's goroutines.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// count counts the lines of the log at level INFO or above containing s.
func (l *logBuf) count(s string) int {
	n := 0
	for _, line := range strings.Split(l.String(), "\n") {
		if strings.Contains(line, s) && !strings.Contains(line, "level=DEBUG") {
			n++
		}
	}
	return n
}

func (l *logBuf) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// TestMalformedLabelServesTheRest: one metric whose item label's value is
// not JSON leaves the source up: that label is left out (and counted),
// the metric and the others are served with their labels, and one line
// is logged however many times the labels are read again.
func TestMalformedLabelServesTheRest(t *testing.T) {
	f := newFake(t, func(f *fakePMCD) { f.itemLabels = `{"n":"v"}`; f.badLabels = fakeA })
	var logs logBuf
	s, err := Open(f.addr(), Options{Timeout: testTimeout, Backoff: []time.Duration{time.Millisecond}, Logger: logs.logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m, err := mapping.New(nil, mapping.Options{})
	if err != nil {
		t.Fatal(err)
	}
	col := bridge.New(m, nil, bridge.Source{Name: "fake", Src: s})
	for i := 0; i < 3; i++ {
		// pmcd flags a label change: the labels are read again
		f.setFetch(func(c net.Conn, pmids []uint32) bool {
			c.Write(mkpdu(pduError, be(pmcdLabelChange)))
			c.Write(goodResult(pmids))
			return true
		})
		e := s.Epoch()
		var out bytes.Buffer
		if err := col.WriteText(&out); err != nil {
			t.Fatal(err)
		}
		f.setFetch(nil)
		s.Metrics()
		waitFor(t, "labels read again", func() bool { s.Metrics(); return s.Epoch() > e })
	}
	var out, self bytes.Buffer
	if err := col.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	writeSelf(t, col, &self)
	for _, want := range []string{"fake_a_total 42", "fake_b_total 42"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("scrape lacks %s:\n%s", want, out.String())
		}
	}
	ms := s.Metrics()
	if len(ms) != 2 || len(ms[0].Labels) != 0 || len(ms[1].Labels) != 1 || ms[1].Labels[0].Value != `"v"` {
		t.Errorf("metrics %+v: want fake.a without its malformed label, fake.b with its label", ms)
	}
	for _, want := range []string{`pcp_exporter_source_up{reason="",source="fake"} 1`, `pcp_exporter_labels_malformed{source="fake"} 1`} {
		if !strings.Contains(self.String(), want) {
			t.Errorf("self-metrics lack %s:\n%s", want, self.String())
		}
	}
	if n := logs.count("malformed labels"); n != 1 {
		t.Errorf("%d log lines about the malformed label, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), `metric 60.0.1`) || !strings.Contains(logs.String(), `\"xyz\" is not JSON`) {
		t.Errorf("the log line does not name the metric and quote the value:\n%s", logs.String())
	}
}

// TestFetchOnlyFailuresBackOff: a pmcd that handshakes and answers the
// metadata but fails every fetch is connected to again once per step of
// the backoff, not at every scrape, and the source is reported down once.
func TestFetchOnlyFailuresBackOff(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	backoff := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond}
	s, err := Open(f.addr(), Options{Timeout: testTimeout, Backoff: backoff})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m, err := mapping.New(nil, mapping.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var logs logBuf
	col := bridge.New(m, logs.logger(), bridge.Source{Name: "fake", Src: s})
	// the first fetch on a connection (the metadata read's) is answered,
	// the scrapes' fail
	var mu sync.Mutex
	fetches := map[net.Conn]int{}
	f.setFetch(func(c net.Conn, pmids []uint32) bool {
		mu.Lock()
		fetches[c]++
		n := fetches[c]
		mu.Unlock()
		if n == 1 {
			c.Write(goodResult(pmids))
			return true
		}
		return false
	})
	start := time.Now()
	for time.Since(start) < 3*time.Second {
		var out bytes.Buffer
		if err := col.WriteText(&out); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	conns := f.connections()
	t.Logf("%d connections in 3 s of scrapes every 10 ms", len(conns))
	// the first is Open's; each later one waits its step of the backoff
	for i := 2; i < len(conns); i++ {
		step := backoff[min(i-2, len(backoff)-1)]
		if gap := conns[i].Sub(conns[i-1]); gap < step*9/10 {
			t.Errorf("connection %d came %v after the one before, want at least the backoff step %v", i, gap, step)
		}
	}
	if len(conns) > 8 {
		t.Errorf("%d connections in 3 s, want at most 8 (backoff %v)", len(conns), backoff)
	}
	if n, up := logs.count("PCP source is down"), logs.count("PCP source is up"); n != 1 || up != 0 {
		t.Errorf("%d down and %d up log lines for one change of state:\n%s", n, up, logs.String())
	}
}

// TestChangeFlagsEveryFetchBackOff: a pmcd flagging a change (names and
// labels) at every fetch has its metadata read again once per step of
// the backoff, not at every scrape, with one INFO line for the first
// change and one WARN line when it goes on; the values are served
// throughout.
func TestChangeFlagsEveryFetchBackOff(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	var logs logBuf
	backoff := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond}
	s, err := Open(f.addr(), Options{Timeout: testTimeout, Backoff: backoff, Logger: logs.logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f.setFetch(func(c net.Conn, pmids []uint32) bool {
		c.Write(mkpdu(pduError, be(pmcdNamesChange|pmcdLabelChange)))
		c.Write(goodResult(pmids))
		return true
	})
	r0 := f.requests()
	start := time.Now()
	for time.Since(start) < 3*time.Second {
		s.Metrics()
		var res source.Result
		if err := s.Fetch(time.Now(), fakePMIDs, &res); err != nil || res.Sets[0].Err != nil || len(res.Sets[0].Values) != 1 {
			t.Fatalf("fetch: %v %+v", err, res.Sets)
		}
		time.Sleep(10 * time.Millisecond)
	}
	reads := f.requests()[pduPMNSTraverse] - r0[pduPMNSTraverse]
	t.Logf("%d metadata reads in 3 s of scrapes every 10 ms", reads)
	// steps 0.1 + 0.2 + 0.4 + 0.8 + 0.8 ... s: at most 6 in 3 s
	if reads < 2 || reads > 6 {
		t.Errorf("%d metadata reads in 3 s, want 2 to 6 (one per backoff step)", reads)
	}
	info := logs.count("level=INFO") + logs.count("level=WARN")
	if info > 3 || logs.count("at every fetch") != 1 {
		t.Errorf("%d lines at INFO or above, want at most 3 (one for the change, one when it goes on):\n%s", info, logs.String())
	}
}

// TestSeriesLimitCuts: an instance domain of more instances than the
// series limit keeps the first ones, a fetch serves at most the limit's
// values, and the cut is counted, logged once, and not read again at
// every scrape.
func TestSeriesLimitCuts(t *testing.T) {
	const n, limit = 1000, 300
	names := make([]string, n)
	for i := range names {
		names[i] = "i" + strings.Repeat("x", i%7)
	}
	f := newFake(t, func(f *fakePMCD) { f.insts = names })
	var logs logBuf
	s, err := Open(f.addr(), Options{Timeout: testTimeout, Backoff: []time.Duration{time.Millisecond}, SeriesLimit: limit, Logger: logs.logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f.setFetch(func(c net.Conn, pmids []uint32) bool {
		c.Write(manyValues(pmids, n))
		return true
	})
	r0 := f.requests()
	for i := 0; i < 5; i++ {
		var res source.Result
		if err := s.Fetch(time.Now(), fakePMIDs, &res); err != nil {
			t.Fatal(err)
		}
		if got := len(res.Sets[0].Values) + len(res.Sets[1].Values); got != limit {
			t.Fatalf("%d values served, want the limit %d", got, limit)
		}
	}
	if got := len(s.Instances(semantics.NewInDom(60, 1))); got != limit {
		t.Errorf("%d instances kept, want %d", got, limit)
	}
	lo := s.LeftOut()
	if lo.SeriesCut != 2*n-limit || lo.InstancesCut != n-limit || lo.SeriesLimit != limit {
		t.Errorf("left out %+v, want %d values and %d instances", lo, 2*n-limit, n-limit)
	}
	if r := f.requests()[pduInstanceReq] - r0[pduInstanceReq]; r != 0 {
		t.Errorf("%d instance reads for instances left out by the limit", r)
	}
	if c := logs.count("series limit"); c != 1 {
		t.Errorf("%d log lines about the limit, want 1:\n%s", c, logs.String())
	}
}

// manyValues is a HIGHRES_RESULT giving each PMID n INSITU values, of
// instances 0 to n-1.
func manyValues(pmids []uint32, n int) []byte {
	b := be(uint32(len(pmids)), 0, 1, 0, 7)
	for _, id := range pmids {
		b = append(b, be(id, uint32(n), semantics.ValInsitu)...)
		for i := 0; i < n; i++ {
			b = append(b, be(uint32(i), uint32(i))...)
		}
	}
	return mkpdu(pduHighresResult, b)
}

// TestMemoryBoundedByWhatIsServed: in a process of its own (the test
// binary run again: its peak RSS is its own), a source scraped through the
// bridge every second reads 64 MiB replies of junk for 20 s, or an
// instance domain of a million instances (a million values per fetch):
// its peak RSS stays under 100 MB; at the end its RSS and its live heap
// (after a collection) are under each case's bounds. The junk's end is a
// minute after it stopped: what it cost is given back. The million
// instances are still being fetched at the end: RSS is then the steady
// state of serving 50,000 of them, up to twice the live heap (GOGC=100)
// plus a reply being decoded, and moves by 10 MB with the collector's
// timing (42-52 MB in runs on two machines), so the live heap is the
// exact bound there and RSS the coarse one.
func TestMemoryBoundedByWhatIsServed(t *testing.T) {
	longtest.Skip(t, "85 s of scrapes of 64 MiB replies of junk or a million instances")
	if raceEnabled {
		t.Skip("RSS under the race detector is not the exporter's")
	}
	cases := []struct {
		name  string
		limit int // the series limit (0: the default)
		// bounds at the end, in MB: RSS and the live heap
		endRSS, live int
		setup        func(f *fakePMCD)
	}{
		{"junk 64 MiB", 0, 50, 8, func(f *fakePMCD) {
			// for 20 s from the third fetch (the metadata read's and a
			// scrape's come first), every fetch is answered by a PDU
			// announcing 64 MiB and an endless stream of junk
			var n atomic.Int32
			var until time.Time
			var mu sync.Mutex
			f.fetch = func(c net.Conn, pmids []uint32) bool {
				mu.Lock()
				if n.Add(1) == 3 {
					until = time.Now().Add(20 * time.Second)
				}
				junk := time.Now().Before(until)
				mu.Unlock()
				if !junk {
					c.Write(goodResult(pmids))
					return true
				}
				c.Write(be(64<<20-16, pduHighresResult, 0))
				zeros := make([]byte, 1<<20)
				for {
					if _, err := c.Write(zeros); err != nil {
						return false
					}
				}
			}
		}},
		// at the default limit (100,000) the peak is 88 MB, but serving
		// them costs 49 MB: this asserts 50,000 (a live heap of 16 MB,
		// most of it the interned label blocks and the instance names)
		{"a million instances", 50_000, 64, 24, func(f *fakePMCD) {
			names := make([]string, 1_000_000)
			for i := range names {
				names[i] = "i" + strconv.Itoa(i)
			}
			f.insts = names
			f.fetch = func(c net.Conn, pmids []uint32) bool {
				c.Write(manyValues(pmids, len(names)))
				return true
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, tc.setup)
			cmd := exec.Command(os.Args[0], "-test.run=^TestMemoryChild$", "-test.v")
			cmd.Env = append(os.Environ(), "PCPX_MEMORY_CHILD="+f.addr(), "PCPX_MEMORY_LIMIT="+strconv.Itoa(tc.limit))
			out, err := cmd.CombinedOutput()
			var peak, end, live int
			at := max(0, bytes.Index(out, []byte("RSS kB: ")))
			if _, serr := fmt.Sscanf(string(out[at:]), "RSS kB: peak %d end %d live heap %d", &peak, &end, &live); err != nil || serr != nil {
				t.Fatalf("child: %v %v:\n%s", err, serr, out)
			}
			t.Logf("peak RSS %d MB; at the end RSS %d MB, live heap %d MB", peak>>10, end>>10, live>>10)
			if peak > 100<<10 || end > tc.endRSS<<10 || live > tc.live<<10 {
				t.Errorf("peak RSS %d MB (want < 100); at the end RSS %d MB (want < %d), live heap %d MB (want < %d):\n%s",
					peak>>10, end>>10, tc.endRSS, live>>10, tc.live, out)
			}
		})
	}
}

// TestMemoryChild is TestMemoryBoundedByWhatIsServed's child: it scrapes
// the fake pmcd at $PCPX_MEMORY_CHILD (series limit $PCPX_MEMORY_LIMIT)
// every second for 85 s, and prints its peak RSS (VmHWM), its RSS at the
// end and then its live heap after a collection ($PCPX_MEMORY_PROFILE: a
// heap profile there).
func TestMemoryChild(t *testing.T) {
	addr := os.Getenv("PCPX_MEMORY_CHILD")
	if addr == "" {
		t.Skip("run by TestMemoryBoundedByWhatIsServed")
	}
	limit, _ := strconv.Atoi(os.Getenv("PCPX_MEMORY_LIMIT"))
	s, err := Open(addr, Options{SeriesLimit: limit})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m, err := mapping.New(nil, mapping.Options{})
	if err != nil {
		t.Fatal(err)
	}
	col := bridge.New(m, nil, bridge.Source{Name: "fake", Src: s})
	for end := time.Now().Add(85 * time.Second); time.Now().Before(end); time.Sleep(time.Second) {
		if err := col.WriteText(io.Discard); err != nil {
			t.Fatal(err)
		}
	}
	status := func(key string) int {
		b, _ := os.ReadFile("/proc/self/status")
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, key+":"); ok {
				n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
				return n
			}
		}
		return -1
	}
	t.Logf("left out %+v", s.LeftOut())
	if p := os.Getenv("PCPX_MEMORY_PROFILE"); p != "" {
		if f, err := os.Create(p); err == nil {
			pprof.WriteHeapProfile(f)
			f.Close()
		}
	}
	peak, end := status("VmHWM"), status("VmRSS")
	runtime.GC()
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(live)
	fmt.Printf("RSS kB: peak %d end %d live heap %d\n", peak, end, live[0].Value.Uint64()>>10)
}

// TestTimedOutConnectionClosedWithoutReset: a fetch that times out drops
// the connection with a half-close, and pmcd's late answer is read, so
// pmcd sees the client leave (EOF) rather than a reset: the path of every
// client's departure, not that of a reset mid-fetch (profile.go).
func TestTimedOutConnectionClosedWithoutReset(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	s := openFake(t, f)
	seen := make(chan error, 1)
	f.setFetch(func(c net.Conn, pmids []uint32) bool {
		time.Sleep(3 * testTimeout) // the source has given up and closed
		// a closed socket answers the first late write with a reset, which
		// fails the second
		c.Write(goodResult(pmids))
		time.Sleep(100 * time.Millisecond)
		_, err := c.Write(goodResult(pmids))
		if err == nil {
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err = c.Read(make([]byte, 16))
		}
		seen <- err
		return false
	})
	var res source.Result
	s.Fetch(time.Now(), fakePMIDs, &res)
	if st := s.Status(time.Now()); st.Reason != source.ReasonDown || !strings.Contains(st.Detail, "no answer in time") {
		t.Fatalf("status %+v, want down after the timeout", st)
	}
	if err := <-seen; err != io.EOF {
		t.Errorf("pmcd's late answer then read: %v, want EOF (no reset)", err)
	}
}

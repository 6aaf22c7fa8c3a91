package pmcd

import (
	"net"
	"slices"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/source"
)

// loadsOf returns s's counts of metadata reads.
func loadsOf(s *Source) loadCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loads
}

// flagOnce makes the fake's next fetch reply carry pmcd's change flags
// code, and fetches through s.
func flagOnce(t *testing.T, f *fakePMCD, s *Source, code uint32) {
	t.Helper()
	f.setFetch(func(c net.Conn, pmids []uint32) bool {
		c.Write(mkpdu(pduError, be(code)))
		c.Write(goodResult(pmids))
		return true
	})
	var res source.Result
	if err := s.Fetch(time.Now(), fakePMIDs, &res); err != nil || res.Sets[0].Err != nil {
		t.Fatalf("fetch with flags: %v %+v", err, res.Sets)
	}
	f.setFetch(nil)
}

func metricNames(ms []source.Metric) []string {
	var names []string
	for _, m := range ms {
		names = append(names, m.Name)
	}
	return names
}

// requestsSince returns the requests the fake received since r0, by
// name, leaving out the handshakes' (CREDS, PROFILE and a PMNS_NAMES of
// pmcd.hostname).
func requestsSince(f *fakePMCD, r0 map[uint32]int) map[string]int {
	got := map[string]int{}
	r := f.requests()
	handshakes := r[pduCreds] - r0[pduCreds]
	for typ, n := range r {
		d := n - r0[typ]
		if typ == pduPMNSNames {
			d -= handshakes
		}
		if d != 0 && typ != pduCreds && typ != pduProfile {
			got[pduName(typ)] = d
		}
	}
	return got
}

// TestNamesChangeOutsideSelection: PMCD_NAMES_CHANGE for names outside
// the selection (an MMV file gone) makes the source check the namespace
// and the selected names' PMIDs only: no descriptor, help, label or
// instance request, the same metrics, the same epoch.
func TestNamesChangeOutsideSelection(t *testing.T) {
	f := newFake(t, func(f *fakePMCD) { f.names = []string{"fake.a", "fake.b", "mmv.x.y"} })
	s, err := Open(f.addr(), Options{Timeout: testTimeout, MetadataTimeout: time.Second, Backoff: []time.Duration{time.Millisecond},
		Selection: Selection{Exclude: []string{"mmv"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	before := s.Metrics()
	if got := metricNames(before); !slices.Equal(got, []string{"fake.a", "fake.b"}) {
		t.Fatalf("metrics %v", got)
	}
	e0, l0 := s.Epoch(), loadsOf(s)
	f.setNames("fake.a", "fake.b", "mmv.z.w")
	flagOnce(t, f, s, pmcdNamesChange)
	r0 := f.requests()
	s.Metrics() // starts the check
	waitFor(t, "names check", func() bool { return loadsOf(s).unchanged == l0.unchanged+1 })
	want := map[string]int{pduName(pduPMNSTraverse): 1, pduName(pduPMNSNames): 1}
	if got := requestsSince(f, r0); len(got) != len(want) || got[pduName(pduPMNSTraverse)] != 1 || got[pduName(pduPMNSNames)] != 1 {
		t.Errorf("requests for a change outside the selection: %v, want %v", got, want)
	}
	if l := loadsOf(s); l.descs != l0.descs || l.all != l0.all || l.changed != l0.changed {
		t.Errorf("metadata reads %+v, before %+v", l, l0)
	}
	if s.Epoch() != e0 {
		t.Errorf("epoch %d, want %d kept", s.Epoch(), e0)
	}
	if after := s.Metrics(); !slices.EqualFunc(after, before, func(a, b source.Metric) bool {
		return a.Name == b.Name && a.Desc == b.Desc && a.Help == b.Help && slices.Equal(a.Labels, b.Labels)
	}) {
		t.Errorf("metrics %+v, before %+v", after, before)
	}
	// the source still fetches on its connection
	var res source.Result
	if err := s.Fetch(time.Now(), fakePMIDs, &res); err != nil || res.Sets[0].Err != nil {
		t.Fatalf("fetch after the check: %v %+v", err, res.Sets)
	}
}

// TestNamesChangeInsideSelection: a metric added to the selection is read
// (its descriptor, help and labels only) and one removed is dropped
// (nothing read), each a new epoch.
func TestNamesChangeInsideSelection(t *testing.T) {
	f := newFake(t, func(f *fakePMCD) { f.names = []string{"fake.a", "fake.b"}; f.itemLabels = `{"n":"1"}` })
	s := openFake(t, f)
	e0, l0 := s.Epoch(), loadsOf(s)
	f.setNames("fake.a", "fake.b", "fake.c")
	flagOnce(t, f, s, pmcdNamesChange)
	r0 := f.requests()
	waitFor(t, "the new metric read", func() bool { s.Metrics(); return s.Epoch() == e0+1 }) // as scrapes do: a read waits out the backoff after the last
	ms := s.Metrics()
	if got := metricNames(ms); !slices.Equal(got, []string{"fake.a", "fake.b", "fake.c"}) {
		t.Fatalf("metrics after fake.c appeared: %v", got)
	}
	c := ms[2]
	if c.Desc.PMID != 60<<22|3 || c.Help != "help" || len(c.Labels) == 0 || !slices.Equal(c.Labels, ms[0].Labels) {
		t.Errorf("fake.c %+v (fake.a's labels %v)", c, ms[0].Labels)
	}
	got := requestsSince(f, r0)
	if got[pduName(pduDescIDs)] != 1 || got[pduName(pduTextReq)] != 2 {
		t.Errorf("requests for one new metric: %v, want one DESC_IDS and two TEXT_REQ", got)
	}
	if l := loadsOf(s); l.changed != l0.changed+1 || l.all != l0.all {
		t.Errorf("metadata reads %+v, before %+v", l, l0)
	}

	f.setNames("fake.b", "fake.c")
	flagOnce(t, f, s, pmcdNamesChange)
	r0 = f.requests()
	waitFor(t, "the removed metric dropped", func() bool { s.Metrics(); return s.Epoch() == e0+2 }) // as scrapes do: a read waits out the backoff after the last
	if got := metricNames(s.Metrics()); !slices.Equal(got, []string{"fake.b", "fake.c"}) {
		t.Fatalf("metrics after fake.a went: %v", got)
	}
	if got := requestsSince(f, r0); len(got) != 2 {
		t.Errorf("requests for a removed metric: %v, want the namespace's only", got)
	}
	var res source.Result
	if err := s.Fetch(time.Now(), fakePMIDs, &res); err != nil || res.Sets[0].Err != nil {
		t.Fatalf("fetch after the change: %v %+v", err, res.Sets)
	}
}

// TestNamesAndLabelChange: names and labels flagged together with the
// selection unchanged read the labels only; an agent change reads all.
func TestNamesAndLabelChange(t *testing.T) {
	f := newFake(t, func(f *fakePMCD) { f.itemLabels = `{"n":"1"}` })
	s := openFake(t, f)
	e0, l0 := s.Epoch(), loadsOf(s)
	flagOnce(t, f, s, pmcdNamesChange|pmcdLabelChange)
	waitFor(t, "labels read again", func() bool { s.Metrics(); return s.Epoch() == e0+1 }) // as scrapes do: a read waits out the backoff after the last
	if l := loadsOf(s); l.labels != l0.labels+1 || l.descs != l0.descs {
		t.Errorf("metadata reads %+v, before %+v", l, l0)
	}
	flagOnce(t, f, s, pmcdNamesChange|pmcdAgentChange)
	waitFor(t, "all read again", func() bool { s.Metrics(); return s.Epoch() == e0+2 }) // as scrapes do: a read waits out the backoff after the last
	if l := loadsOf(s); l.all != l0.all+1 {
		t.Errorf("metadata reads %+v, before %+v", l, l0)
	}
}

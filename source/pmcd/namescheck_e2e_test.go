package pmcd

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/mmv/mmvwrite"
)

// TestMMVFileChangeKeepsMetadata: against the local pmcd, an MMV file
// appearing and then going (pmdammv raises PMCD_NAMES_CHANGE for each)
// makes a source whose selection excludes mmv check the namespace only:
// it sees the flag, reads no descriptor, keeps its epoch and its metrics.
func TestMMVFileChangeKeepsMetadata(t *testing.T) {
	t.Parallel()
	bins := e2e.Require(t, "pminfo", "pmstore")
	pminfo, pmstore := bins[0], bins[1]
	e2e.LockPMCD(t, false)
	if out, err := exec.Command(pminfo, "-f", "mmv.control.files").CombinedOutput(); err != nil {
		if e2e.Mandatory() {
			t.Fatalf("pmcd with pmdammv not reachable: %v: %s", err, out)
		}
		t.Skipf("pmcd with pmdammv not reachable: %v: %s", err, out)
	}
	s, err := Open("local:", Options{Selection: Selection{Exclude: []string{"mmv"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before := s.Metrics()
	if len(before) < 100 {
		t.Fatalf("%d metrics from the local pmcd", len(before))
	}
	pmids := []semantics.PMID{before[0].Desc.PMID}
	e0, l0 := s.Epoch(), loadsOf(s)

	// pmdammv looks at its directory when its metrics are fetched, or at
	// once on mmv.control.reload: a second client provokes it
	provoke := func() {
		if out, err := exec.Command(pmstore, "mmv.control.reload", "1").CombinedOutput(); err != nil {
			t.Logf("pmstore mmv.control.reload: %v: %s", err, out)
		}
		exec.Command(pminfo, "-f", "mmv.control.files").Run()
	}
	// waitChecked fetches through s until it has checked its names n
	// times in all (the flag comes with a fetch reply).
	waitChecked := func(what string, n uint64) {
		t.Helper()
		var res source.Result
		for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			provoke()
			if err := s.Fetch(time.Now(), pmids, &res); err != nil {
				t.Fatal(err)
			}
			s.Metrics()
			if loadsOf(s).unchanged >= n {
				return
			}
		}
		t.Fatalf("no names check after %s: reads %+v, before %+v", what, loadsOf(s), l0)
	}
	name := fmt.Sprintf("pcpexpnames%d", os.Getpid()%100000)
	path := filepath.Join(mmvwrite.DefaultDir(), name)
	w, err := mmvwrite.New(name, mmvwrite.Config{Metrics: []mmvwrite.MetricDef{
		{Name: "requests", Item: 1, Type: mmvwrite.TypeU64, Sem: semantics.SemCounter, OneLine: "a test's requests"},
	}})
	if err != nil {
		if e2e.Mandatory() {
			t.Fatalf("cannot write to pmcd's MMV directory: %v", err)
		}
		t.Skipf("cannot write to pmcd's MMV directory: %v", err)
	}
	t.Cleanup(func() { w.Close(); os.Remove(path) })
	waitChecked("an MMV file appeared", l0.unchanged+1)
	if out, err := exec.Command(pminfo, "mmv."+name).CombinedOutput(); err != nil {
		t.Fatalf("pmdammv does not export the new file: %v: %s", err, out)
	}
	w.Close()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	waitChecked("the MMV file went", loadsOf(s).unchanged+1)

	l := loadsOf(s)
	if l.descs != l0.descs || l.all != l0.all || l.changed != l0.changed {
		t.Errorf("metadata reads %+v, before %+v: descriptors read again", l, l0)
	}
	if s.Epoch() != e0 {
		t.Errorf("epoch %d, want %d kept", s.Epoch(), e0)
	}
	after := s.Metrics()
	if !slices.EqualFunc(after, before, func(a, b source.Metric) bool {
		return a.Name == b.Name && a.Desc == b.Desc && a.Help == b.Help && slices.Equal(a.Labels, b.Labels)
	}) {
		t.Errorf("metrics changed: %d, before %d", len(after), len(before))
	}
	t.Logf("reads %+v (before %+v), epoch %d, %d metrics", l, l0, s.Epoch(), len(after))
}

// TestMMVFileChangeReadsNewMetrics: against the local pmcd, a source
// selecting mmv picks up the metrics of an MMV file that appears (reading
// only theirs: the same metadata as a full read on a new source) and
// drops them when the file goes.
func TestMMVFileChangeReadsNewMetrics(t *testing.T) {
	t.Parallel()
	bins := e2e.Require(t, "pminfo", "pmstore")
	pminfo, pmstore := bins[0], bins[1]
	e2e.LockPMCD(t, false)
	if out, err := exec.Command(pminfo, "-f", "mmv.control.files").CombinedOutput(); err != nil {
		if e2e.Mandatory() {
			t.Fatalf("pmcd with pmdammv not reachable: %v: %s", err, out)
		}
		t.Skipf("pmcd with pmdammv not reachable: %v: %s", err, out)
	}
	opts := Options{Selection: Selection{Include: []string{"mmv"}}}
	s, err := Open("local:", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pmids := []semantics.PMID{s.Metrics()[0].Desc.PMID}
	name := fmt.Sprintf("pcpexpnew%d", os.Getpid()%100000)
	prefix := "mmv." + name + "."
	has := func(ms []source.Metric) bool {
		return slices.ContainsFunc(ms, func(m source.Metric) bool { return m.Name == prefix+"requests" })
	}
	// waitFor fetches through s (pmcd's flags come with a fetch reply),
	// having pmdammv look at its directory, until ok.
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		var res source.Result
		for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			exec.Command(pmstore, "mmv.control.reload", "1").Run()
			s.Fetch(time.Now(), pmids, &res)
			s.Metrics()
			if ok() {
				return
			}
		}
		t.Fatalf("%s: not within 20 s; reads %+v", what, loadsOf(s))
	}
	l0 := loadsOf(s)
	path := filepath.Join(mmvwrite.DefaultDir(), name)
	w, err := mmvwrite.New(name, mmvwrite.Config{Metrics: []mmvwrite.MetricDef{
		{Name: "requests", Item: 1, Type: mmvwrite.TypeU64, Sem: semantics.SemCounter, OneLine: "a test's requests", Help: "Requests\nof a test."},
	}})
	if err != nil {
		if e2e.Mandatory() {
			t.Fatalf("cannot write to pmcd's MMV directory: %v", err)
		}
		t.Skipf("cannot write to pmcd's MMV directory: %v", err)
	}
	t.Cleanup(func() { w.Close(); os.Remove(path) })
	waitFor("the new file's metrics", func() bool { return has(s.Metrics()) })
	if l := loadsOf(s); l.all != l0.all || l.changed == l0.changed {
		t.Errorf("reads %+v, before %+v: want the new metrics read alone", l, l0)
	}
	full, err := Open("local:", opts)
	if err != nil {
		t.Fatal(err)
	}
	want := full.Metrics()
	full.Close()
	if got := s.Metrics(); !slices.EqualFunc(got, want, func(a, b source.Metric) bool {
		return a.Name == b.Name && a.Desc == b.Desc && a.OneLine == b.OneLine && a.Help == b.Help && slices.Equal(a.Labels, b.Labels)
	}) {
		t.Errorf("metrics after reading the new ones:\n%+v\na full read:\n%+v", got, want)
	}
	w.Close()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	waitFor("the file's metrics dropped", func() bool { return !has(s.Metrics()) })
	if l := loadsOf(s); l.all != l0.all {
		t.Errorf("reads %+v, before %+v: a full read", l, l0)
	}
	t.Logf("reads %+v (before %+v), %d metrics", loadsOf(s), l0, len(s.Metrics()))
}

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

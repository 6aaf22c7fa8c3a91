package pmcd

import (
	"runtime"
	"testing"
	"time"
	"unsafe"
	"weak"

	"github.com/pcp-exporter/pcp-exporter/semantics"
)

// TestFleetSharesMetadata: sources of pmcds answering the same metadata
// hold one copy of their metrics and descriptors, but each its own
// instances; a pmcd whose labels differ gets its own; the shared copy goes
// when its last source does.
func TestFleetSharesMetadata(t *testing.T) {
	fake := func(insts []string, labels string) *fakePMCD {
		return newFake(t, func(f *fakePMCD) { f.insts, f.itemLabels = insts, labels })
	}
	f1 := fake([]string{"sda", "sdb"}, `{"n":"v"}`)
	f2 := fake([]string{"nvme0n1"}, `{"n":"v"}`)
	f3 := fake([]string{"sda", "sdb"}, `{"n":"w"}`)
	var srcs []*Source
	for _, f := range []*fakePMCD{f1, f2, f3} {
		s, err := Open(f.addr(), Options{Timeout: testTimeout})
		if err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, s)
	}
	m1, m2, m3 := srcs[0].Metrics(), srcs[1].Metrics(), srcs[2].Metrics()
	if len(m1) != 2 || len(m2) != 2 || len(m3) != 2 {
		t.Fatalf("metrics: %d, %d, %d; want 2 each", len(m1), len(m2), len(m3))
	}
	if unsafe.SliceData(m1) != unsafe.SliceData(m2) {
		t.Error("two pmcds with the same metadata: metrics not shared")
	}
	if unsafe.SliceData(m1) == unsafe.SliceData(m3) || m3[0].Labels.String() == m1[0].Labels.String() {
		t.Errorf("a pmcd with other labels shares the first one's metrics (labels %s and %s)", m1[0].Labels, m3[0].Labels)
	}
	in := semantics.InDom(60<<22 | 1)
	if i1, i2 := srcs[0].Instances(in), srcs[1].Instances(in); len(i1) != 2 || len(i2) != 1 || i2[0].Name != "nvme0n1" {
		t.Errorf("instances are each pmcd's own: got %v and %v", i1, i2)
	}
	srcs[0].mu.Lock()
	w := weak.Make(srcs[0].md.shared)
	srcs[0].mu.Unlock()
	for _, s := range srcs {
		s.Close()
	}
	srcs, m1, m2, m3 = nil, nil, nil, nil
	for i := 0; i < 10 && w.Value() != nil; i++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if w.Value() != nil {
		t.Error("the shared metadata outlived its sources")
	}
}

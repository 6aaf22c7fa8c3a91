package archive

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/archive/internal/archivetest"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

// v3InDomRecord encodes a v3 indom record (typeInDom or typeInDomDelta);
// an instance with an empty name is a removal (delta).
func v3InDomRecord(typ uint32, t time.Time, indom semantics.InDom, insts []source.Instance) []byte {
	var strs []byte
	idx := make([]int32, len(insts))
	for i, in := range insts {
		if in.Name == "" {
			idx[i] = -1
			continue
		}
		idx[i] = int32(len(strs))
		strs = append(append(strs, in.Name...), 0)
	}
	n := 8 + 12 + 4 + 4 + 8*len(insts) + len(strs) + 4
	b := make([]byte, 0, n)
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	b = binary.BigEndian.AppendUint32(b, typ)
	sec := uint64(t.Unix())
	b = binary.BigEndian.AppendUint32(b, uint32(sec))
	b = binary.BigEndian.AppendUint32(b, uint32(sec>>32))
	b = binary.BigEndian.AppendUint32(b, uint32(t.Nanosecond()))
	b = binary.BigEndian.AppendUint32(b, uint32(indom))
	b = binary.BigEndian.AppendUint32(b, uint32(len(insts)))
	for _, in := range insts {
		b = binary.BigEndian.AppendUint32(b, uint32(in.ID))
	}
	for _, x := range idx {
		b = binary.BigEndian.AppendUint32(b, uint32(x))
	}
	b = append(b, strs...)
	return binary.BigEndian.AppendUint32(b, uint32(n))
}

// deltaIndom is the corpus v3 archive's indom that indoms.gauge and
// indoms.state have.
var deltaIndom = semantics.NewInDom(245, 1)

// writeDeltaArchive copies the corpus's indoms_v3 archive into dir and
// appends to its .meta a full record of deltaIndom with b instances, then
// d deltas a millisecond apart, each removing the oldest instance and
// adding a new one (every 7th re-adds a removed id under a new name). It
// returns the base name and the instances expected after each record.
// .meta record types of instance domains (libpcp.h).
const (
	typeInDom      = 5
	typeInDomDelta = 6
)

func writeDeltaArchive(t testing.TB, dir string, b, d int, keepExpected bool) (string, [][]source.Instance) {
	src := filepath.Join(corpus, "archives", "indoms", "indoms_v3")
	base := filepath.Join(dir, "indoms_v3")
	for _, ext := range []string{".0", ".index", ".meta"} {
		raw, err := os.ReadFile(src + ext)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(base+ext, raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a, err := pcplog.Open(base)
	if err != nil {
		t.Fatal(err)
	}
	at := deltaStart(a)
	f, err := os.OpenFile(base+".meta", os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cur := map[int32]string{}
	var full []source.Instance
	var queue []int32 // present ids, oldest first
	for i := 0; i < b; i++ {
		in := source.Instance{ID: int32(100 + i), Name: fmt.Sprintf("i%06d", 100+i)}
		full = append(full, in)
		cur[in.ID] = in.Name
		queue = append(queue, in.ID)
	}
	var expected [][]source.Instance
	snapshot := func() {
		if !keepExpected {
			return
		}
		var s []source.Instance
		for id := int32(0); id < int32(100+b+d); id++ {
			if n, ok := cur[id]; ok {
				s = append(s, source.Instance{ID: id, Name: n})
			}
		}
		expected = append(expected, s)
	}
	snapshot()
	out := v3InDomRecord(typeInDom, at, deltaIndom, full)
	var removed []int32
	for k := 0; k < d; k++ {
		// libpcp 6.0.3 corrupts its heap on a delta removing an absent
		// instance: only present ones are removed
		gone := queue[0]
		queue = queue[1:]
		removed = append(removed, gone)
		added := source.Instance{ID: int32(100 + b + k), Name: fmt.Sprintf("n%06d", 100+b+k)}
		if k%7 == 6 && len(removed) > 3 {
			id := removed[len(removed)-3]
			added = source.Instance{ID: id, Name: fmt.Sprintf("again%06d", k)}
		}
		delete(cur, gone)
		if _, ok := cur[added.ID]; !ok {
			cur[added.ID] = added.Name
			queue = append(queue, added.ID)
		}
		out = append(out, v3InDomRecord(typeInDomDelta, at.Add(time.Duration(k+1)*time.Millisecond), deltaIndom, []source.Instance{{ID: gone}, added})...)
		snapshot()
	}
	if _, err := f.Write(out); err != nil {
		t.Fatal(err)
	}
	return base, expected
}

// deltaStart is the time of writeDeltaArchive's full record.
func deltaStart(a *pcplog.Archive) time.Time { return a.Label().Start.Add(2 * time.Second) }

// TestInDomDeltasMatchPmdumplog checks the instances in force after every
// delta of a crafted v3 archive against the test's own bookkeeping and
// against `pmdumplog -i` (libpcp).
func TestInDomDeltasMatchPmdumplog(t *testing.T) {
	base, expected := writeDeltaArchive(t, t.TempDir(), 40, 150, true)
	a, err := pcplog.Open(base)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range expected {
		at := deltaStart(a).Add(time.Duration(i) * time.Millisecond)
		if got := fmt.Sprint(a.InstancesAt(deltaIndom, at)); got != fmt.Sprint(want) {
			t.Fatalf("after record %d:\n got %s\nwant %v", i, got, want)
		}
	}
	bin := e2e.Require(t, "pmdumplog")[0]
	out, err := exec.Command(bin, "-i", base).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("pmdumplog: %v\n%s", err, stderr)
	}
	checked := archivetest.CheckInDomsAgainstPmdumplog(t, a, a.Label().Start, out)
	if checked < len(expected) {
		t.Errorf("%d indom records checked against pmdumplog, want at least %d", checked, len(expected))
	}
}

// TestInDomDeltasBounded opens a 300 KB v3 archive whose .meta holds an
// indom of 4000 instances changed by 4000 deltas (full copies: 16 million
// instances, ~1 GB), lists its instances, and replays a metric of the
// domain (libpcp's time calipers): the bytes allocated and those retained
// stay within a stated multiple of the .meta file.
func TestInDomDeltasBounded(t *testing.T) {
	const b, d = 4000, 4000
	base, _ := writeDeltaArchive(t, t.TempDir(), b, d, false)
	fi, err := os.Stat(base + ".meta")
	if err != nil {
		t.Fatal(err)
	}
	size := fi.Size()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	began := time.Now()
	a, err := pcplog.Open(base)
	if err != nil {
		t.Fatal(err)
	}
	ins := a.Instances(deltaIndom)
	end := a.InstancesAt(deltaIndom, deltaStart(a).Add(d*time.Millisecond))
	runtime.GC()
	runtime.ReadMemStats(&after)
	retained := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	alloc := int64(after.TotalAlloc - before.TotalAlloc)
	t.Logf(".meta %d bytes: %d allocated, %d retained, %v; %d instances ever, %d at the end", size, alloc, retained, time.Since(began), len(ins), len(end))
	// factor: 40 bytes of source.Instance per 8-byte instance entry,
	// deltas and copies (at most as many as the deltas) included
	if retained > 16*size {
		t.Errorf("retained %d bytes for a %d-byte .meta (bound 16x)", retained, size)
	}
	if alloc > 64*size {
		t.Errorf("allocated %d bytes for a %d-byte .meta (bound 64x)", alloc, size)
	}
	if len(end) != b {
		t.Errorf("%d instances at the end, want %d", len(end), b)
	}

	// a replay of the domain's metric computes its calipers
	runtime.GC()
	runtime.ReadMemStats(&before)
	began = time.Now()
	rp, err := NewReplay([]*pcplog.Archive{a}, ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rp.Close()
	p, ok := a.Lookup("indoms.gauge")
	if !ok {
		t.Fatal("no indoms.gauge")
	}
	var res source.Result
	for i := 0; i < 10; i++ {
		if err := rp.Fetch(a.Label().Start.Add(time.Duration(i)*5*time.Second), []semantics.PMID{p}, &res); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	alloc = int64(after.TotalAlloc - before.TotalAlloc)
	t.Logf("replay: %d allocated, %v", alloc, time.Since(began))
	if alloc > 64*size {
		t.Errorf("replay allocated %d bytes for a %d-byte .meta (bound 64x)", alloc, size)
	}
}

// repeatStream writes n copies of one compressed stream of chunk: the
// readers take concatenated xz streams and zstd frames as one file, so a
// file of n small streams expands to n times chunk.

package mmv

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/mmv/mmvwrite"
)

// churnConfig has metrics of several types over one indom, so a fetch
// reads many values that a rewrite changes together.
func churnConfig() mmvwrite.Config {
	cfg := mmvwrite.Config{Cluster: 7}
	var insts []mmvwrite.InstanceDef
	for i := 0; i < 10; i++ {
		insts = append(insts, mmvwrite.InstanceDef{ID: int32(i * 3), Name: "inst" + strconv.Itoa(i)})
	}
	cfg.InDoms = []mmvwrite.InDomDef{{Serial: 1, Instances: insts}}
	types := []MetricType{TypeI64, TypeU64, TypeDouble, TypeString, TypeU32}
	for i := 0; i < 20; i++ {
		cfg.Metrics = append(cfg.Metrics, mmvwrite.MetricDef{Name: fmt.Sprintf("m%02d", i), Item: uint32(i + 1), Type: types[i%len(types)], Sem: semInstant, InDom: 1})
	}
	cfg.Metrics = append(cfg.Metrics, mmvwrite.MetricDef{Name: "single", Item: 100, Type: TypeU64, Sem: semCounter})
	return cfg
}

// setAll stores n in every value of w.
func setAll(w *mmvwrite.Writer, cfg mmvwrite.Config, n uint64) {
	for _, m := range cfg.Metrics {
		insts := []string{""}
		if m.InDom != 0 {
			insts = nil
			for _, x := range cfg.InDoms[0].Instances {
				insts = append(insts, x.Name)
			}
		}
		for _, in := range insts {
			h := w.MustHandle(m.Name, in)
			if m.Type == TypeString {
				_ = h.SetString("n=" + strconv.FormatUint(n, 10))
			} else {
				h.SetUint64(n)
			}
		}
	}
}

// checkConsistent verifies that every value of a fetch carries the same
// iteration number, and returns it (ok false when no value was fetched).
// With zeroOK the file is a new one being filled after it was published:
// zero values are accepted anywhere, and a STRING value may be any prefix
// of its final text, since SetString (like libpcp_mmv's mmv_set_string)
// clears the slot and then copies the bytes, with nothing a reader can
// check in between.
func checkConsistent(t *testing.T, res *source.Result, zeroOK bool) (uint64, bool) {
	t.Helper()
	var n uint64
	seen := false
	type str struct {
		pmid semantics.PMID
		inst int32
		s    string
	}
	var strs []str
	for _, set := range res.Sets {
		if set.Err != nil {
			if !errors.Is(set.Err, semantics.ErrPMID) {
				t.Fatalf("pmid %s: %v", set.PMID, set.Err)
			}
			continue
		}
		for _, v := range set.Values {
			var x uint64
			switch v.Value.Type() {
			case semantics.TypeString:
				strs = append(strs, str{set.PMID, v.Inst, string(v.Value.Bytes())})
				continue
			case semantics.TypeDouble:
				x = uint64(v.Value.Float64())
			default:
				x = v.Value.Uint64()
			}
			if x == 0 && zeroOK {
				continue
			}
			if !seen {
				n, seen = x, true
			} else if uint32(x) != uint32(n) {
				t.Fatalf("pmid %s inst %d: value %d in a fetch whose other values are %d: torn read", set.PMID, v.Inst, x, n)
			}
		}
	}
	for _, s := range strs {
		if !seen {
			// strings only: they must agree with each other
			if x, err := strconv.ParseUint(strings.TrimPrefix(s.s, "n="), 10, 64); err == nil && strings.HasPrefix(s.s, "n=") && !zeroOK {
				n, seen = x, true
			}
			continue
		}
		want := "n=" + strconv.FormatUint(uint64(uint32(n)), 10)
		if s.s == want || (zeroOK && strings.HasPrefix(want, s.s)) {
			continue
		}
		t.Fatalf("pmid %s inst %d: string %q in a fetch whose other values are %d: torn read", s.pmid, s.inst, s.s, n)
	}
	return n, seen
}

// TestRewriteInPlace rewrites a file in place with the generation protocol
// (g2 = 0, new values, new g1, g2 = g1) in one goroutine while another
// fetches it thousands of times: no fetch may mix two generations.
func TestRewriteInPlace(t *testing.T) {
	cfg := churnConfig()
	path := filepath.Join(t.TempDir(), "churn")
	w, err := mmvwrite.New(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	setAll(w, cfg, 1)
	f, err := OpenFile(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var pmids []semantics.PMID
	for _, m := range f.Metrics() {
		pmids = append(pmids, m.Desc.PMID)
	}
	data := mapped(t, path)
	g1 := (*uint64)(unsafe.Pointer(&data[8]))
	g2 := (*uint64)(unsafe.Pointer(&data[16]))
	base := atomic.LoadUint64(g1)
	var stop atomic.Bool
	var rewrites atomic.Uint64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := uint64(2); !stop.Load(); n++ {
			atomic.StoreUint64(g2, 0)
			setAll(w, cfg, n)
			atomic.StoreUint64(g1, base+n)
			atomic.StoreUint64(g2, base+n)
			rewrites.Add(1)
			time.Sleep(100 * time.Microsecond)
		}
	}()
	var res source.Result
	var last uint64
	fetched := 0
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; (fetched < 3000 || rewrites.Load() < 1000) && time.Now().Before(deadline); i++ {
		if err := f.Fetch(time.Time{}, pmids, &res); err != nil {
			continue // the file kept changing for every retry: no values, no torn ones
		}
		if n, ok := checkConsistent(t, &res, false); ok {
			fetched++
			if uint32(n) < uint32(last) {
				t.Fatalf("fetch %d: iteration %d after %d", i, n, last)
			}
			last = n
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d consistent fetches during %d rewrites", fetched, rewrites.Load())
	if fetched < 3000 || rewrites.Load() < 1000 {
		t.Errorf("only %d fetches with values during %d rewrites", fetched, rewrites.Load())
	}
}

// TestRecreate replaces a file continuously (unlink and create, as
// libpcp_mmv does at each mmv_stats_start) while a File and a Dir fetch it.
func TestRecreate(t *testing.T) {
	cfg := churnConfig()
	dir := t.TempDir()
	path := filepath.Join(dir, "churn")
	w, err := mmvwrite.New(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	setAll(w, cfg, 1)
	f, err := OpenFile(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := OpenDir(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var pmids []semantics.PMID
	for _, m := range f.Metrics() {
		pmids = append(pmids, m.Desc.PMID)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	var werr error
	var rewrites atomic.Uint64
	go func() {
		defer wg.Done()
		defer func() { w.Close() }()
		for n := uint64(2); !stop.Load(); n++ {
			w.Close()
			nw, err := mmvwrite.New(path, cfg)
			if err != nil {
				werr = err
				return
			}
			w = nw
			setAll(w, cfg, n)
			rewrites.Add(1)
			time.Sleep(200 * time.Microsecond)
		}
	}()
	var res source.Result
	fetched := 0
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; (fetched < 3000 || rewrites.Load() < 1000) && time.Now().Before(deadline); i++ {
		var src source.Source = f
		if i%2 == 1 {
			src = d
		}
		if err := src.Fetch(time.Time{}, pmids, &res); err != nil {
			continue
		}
		if _, ok := checkConsistent(t, &res, true); ok {
			fetched++
		}
	}
	stop.Store(true)
	wg.Wait()
	if werr != nil {
		t.Fatal(werr)
	}
	t.Logf("%d consistent fetches during %d re-creations", fetched, rewrites.Load())
	if fetched < 3000 || rewrites.Load() < 1000 {
		t.Errorf("only %d fetches with values during %d re-creations", fetched, rewrites.Load())
	}
}

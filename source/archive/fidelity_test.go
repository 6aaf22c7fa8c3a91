package archive

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/archive/internal/archivetest"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

// Archives of PCP's own QA suite (testdata/pcp-qa/README.md says where
// from); every expected value below was produced by the PCP command quoted
// next to it, run in testdata/pcp-qa with TZ=UTC PCP_DERIVED_CONFIG= (T is
// testdata/pcp-corpus/tools).
const qaDir = "../../testdata/pcp-qa"

func openQA(t *testing.T, name string) *pcplog.Archive {
	t.Helper()
	a, err := pcplog.Open(filepath.Join(qaDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func replayAt(t *testing.T, a *pcplog.Archive, metric string, offset time.Duration, rule semantics.InterpRule) (*Replay, semantics.Desc, source.Result) {
	t.Helper()
	rp, err := NewReplay([]*pcplog.Archive{a}, ReplayOptions{Interp: rule})
	if err != nil {
		t.Fatal(err)
	}
	p, ok := a.Lookup(metric)
	if !ok {
		t.Fatalf("no metric %s", metric)
	}
	d, _ := a.Desc(p)
	var res source.Result
	if err := rp.Fetch(rp.Start().Add(offset), []semantics.PMID{p}, &res); err != nil {
		t.Fatal(err)
	}
	return rp, d, res
}

// TestInstanceNamesInForce: buggy_archive renumbers its filesystems at
// 19:05:48.2; a sample after that names each id as the new records do.
func TestInstanceNamesInForce(t *testing.T) {
	a := openQA(t, "buggy_archive")
	rp, d, res := replayAt(t, a, "filesys.used", 110*time.Second, semantics.InterpPrior)
	defer rp.Close()
	// /usr/bin/python3 $T/pmfetch_interp.py -a buggy_archive -t 1 -S 110 filesys.used
	// (pmrep -a buggy_archive filesys.used -S +110s -t 1s -s 1 -r agrees)
	want := map[int32][2]string{
		0: {"/dev/mapper/ocivolume-root", "17313740"},
		1: {"/dev/sda2", "342460"},
		2: {"/dev/sdb", "28"},
		3: {"/dev/sda1", "5130"},
		4: {"/dev/mapper/ocivolume-oled", "1281016"},
	}
	ins, until := rp.InstancesInForce(d.InDom, res.Time)
	names := map[int32]string{}
	for _, in := range ins {
		names[in.ID] = in.Name
	}
	if len(res.Sets[0].Values) != len(want) {
		t.Fatalf("%d values, want %d", len(res.Sets[0].Values), len(want))
	}
	for _, v := range res.Sets[0].Values {
		w := want[v.Inst]
		if got := string(semantics.AppendText(nil, v.Value)); names[v.Inst] != w[0] || got != w[1] {
			t.Errorf("inst %d: %q=%s, want %q=%s", v.Inst, names[v.Inst], got, w[0], w[1])
		}
	}
	if !until.IsZero() && !until.After(res.Time) {
		t.Errorf("answer holds until %v, before the sample at %v", until, res.Time)
	}
	// before the renumbering the same ids had other names: the first
	// samples name id 1 as the first record does
	// (/usr/bin/python3 $T/pmfetch_interp.py -a buggy_archive -t 1 -S 0 filesys.used)
	early, _ := rp.InstancesInForce(d.InDom, a.Label().Start)
	for _, in := range early {
		if in.ID == 1 && in.Name == "/dev/sda2" {
			t.Errorf("at the start, id 1 already has its later name %q", in.Name)
		}
	}
}

// TestResultOrderIsLibpcps: interpolated results list instances in the walk
// order of libpcp's instance hash table, which derived avg() and sum() over
// FLOAT accumulate in.
func TestResultOrderIsLibpcps(t *testing.T) {
	for _, c := range []struct {
		archive, metric string
		offset          time.Duration
		want            []int32
	}{
		// /usr/bin/python3 testdata/pcp-qa/result_order.py testdata/pcp-corpus/archives/live/live kernel.all.load 4
		{"../pcp-corpus/archives/live/live", "kernel.all.load", 4 * time.Second, []int32{15, 1, 5}},
		// /usr/bin/python3 result_order.py buggy_archive filesys.used 110
		{"buggy_archive", "filesys.used", 110 * time.Second, []int32{0, 1, 2, 3, 4}},
	} {
		a := openQA(t, c.archive)
		rp, _, res := replayAt(t, a, c.metric, c.offset, semantics.InterpPrior)
		var got []int32
		for _, v := range res.Sets[0].Values {
			got = append(got, v.Inst)
		}
		rp.Close()
		if !slices.Equal(got, c.want) {
			t.Errorf("%s %s: instances %v, libpcp lists %v", c.archive, c.metric, got, c.want)
		}
	}
	// bucket collisions: the later of two ids in a bucket comes first
	if got := hashWalkOrder([]int32{7, 3, 11, 0}); !slices.Equal(got, []int32{0, 11, 3, 7}) {
		t.Errorf("hashWalkOrder = %v", got)
	}
}

// TestDoubleCounterLongDouble: libpcp's time differences are long double
// sums; with them the DOUBLE counter below interpolates to ...946, with
// double sums to ...944.
func TestDoubleCounterLongDouble(t *testing.T) {
	a := openQA(t, "19970807.09.54")
	rp, _, res := replayAt(t, a, "sample.milliseconds", 12636272054*time.Nanosecond, semantics.InterpPrior)
	defer rp.Close()
	// /usr/bin/python3 $T/pmfetch_interp.py -a 19970807.09.54 -t 1 -S 12.636272054 sample.milliseconds
	const want = 14628.265173623946
	if vs := res.Sets[0].Values; len(vs) != 1 || vs[0].Value.Float64() != want {
		t.Fatalf("values %v, want %v", vs, want)
	}
}

// TestMetricNamesEndAtNUL: vldb-disks stores disk.dev.total padded with
// NULs (pminfo -a vldb-disks lists disk.dev.total first).
func TestMetricNamesEndAtNUL(t *testing.T) {
	a := openQA(t, "vldb-disks")
	if _, ok := a.Lookup("disk.dev.total"); !ok {
		t.Error("disk.dev.total not found")
	}
	for _, m := range a.Metrics() {
		if strings.IndexByte(m.Name, 0) >= 0 {
			t.Errorf("name %q holds a NUL", m.Name)
		}
	}
}

// TestMetaCutShort: badlen-9's .meta ends inside a record. pmdumplog
// badlen-9: 'Cannot open archive "badlen-9": Corrupted record in a PCP
// archive log'. Opened live, the partial record is not yet written.
func TestMetaCutShort(t *testing.T) {
	_, err := pcplog.Open(filepath.Join(qaDir, "badlen-9"))
	if err == nil || !strings.Contains(err.Error(), "badlen-9.meta: offset 798: metadata record cut short") {
		t.Errorf("Open: %v, want the cut record at offset 798", err)
	}
	if _, err := pcplog.OpenLive(filepath.Join(qaDir, "badlen-9")); err != nil {
		t.Errorf("OpenLive: %v", err)
	}
}

// TestVolumeCutShort: a finished archive whose last record is cut keeps
// every record before it and reports the cut. pmdumplog on the copy cut at
// 1700 bytes prints the records up to 23:55:01.171706, then
// "pmFetch: Corrupted record in a PCP archive log".
func TestVolumeCutShort(t *testing.T) {
	dir := t.TempDir()
	base := archivetest.CopyArchive(t, filepath.Join(qaDir, "19970807.09.54"), dir)
	b, err := os.ReadFile(base + ".0")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(base+".0", b[:1700], 0o644); err != nil {
		t.Fatal(err)
	}
	for _, live := range []bool{false, true} {
		open := pcplog.Open
		if live {
			open = pcplog.OpenLive
		}
		a, err := open(base)
		if err != nil {
			t.Fatal(err)
		}
		r := a.Records()
		var last time.Time
		for r.Next() {
			last = r.Record().Time
		}
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
		r.Close()
		if got := last.UTC().Format("15:04:05.000000"); got != "23:55:01.171706" {
			t.Errorf("last record at %s, want 23:55:01.171706", got)
		}
		err = a.Truncated()
		switch {
		case live && err != nil:
			t.Errorf("live archive: %v, want nothing (not yet written)", err)
		case !live && (err == nil || !strings.Contains(err.Error(), "19970807.09.54.0: offset 1696: data record cut short")):
			t.Errorf("Truncated: %v, want the cut record at offset 1696", err)
		}
	}
	// a whole archive has none
	a := openQA(t, "19970807.09.54")
	r := a.Records()
	for r.Next() {
	}
	r.Close()
	if err := a.Truncated(); err != nil {
		t.Errorf("whole archive: %v", err)
	}
}

// TestLongHelpFallsBack: without long help text libpcp answers the one-line
// text. pminfo -a testdata/pcp-corpus/archives/types/types -T types.tbytes:
// "Help: one-line help for tbytes (corpus-host)".
func TestLongHelpFallsBack(t *testing.T) {
	a, err := pcplog.Open("../../testdata/pcp-corpus/archives/types/types")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := a.Lookup("types.tbytes")
	const want = "one-line help for tbytes (corpus-host)"
	if got := a.Help(p); got != want {
		t.Errorf("Help = %q, want %q", got, want)
	}
	for _, m := range a.Metrics() {
		if m.Name == "types.tbytes" && m.Help != want {
			t.Errorf("Metrics help = %q, want %q", m.Help, want)
		}
	}
}

package archive

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

// Value sets whose encoding contradicts their metric's descriptor (issue
// 37 item 5), in two archives of PCP's QA: libpcp refuses them.

// TestEncodingRefusedRaw: read as is, the value sets libpcp's pmExtractValue
// refuses (PM_ERR_CONV: testdata/pcp-qa/*.conv.txt, written by
// extract_conv.py with python3-pcp 6.0.3: 2 of 2 values of logsummary-bug,
// 938 of 2,251 of archive-20141125-000009, 4 of 216 of badblocks) are those
// the Reader gives ErrEncoding (the set's encoding contradicts the type) or
// ErrValueBlock (a block's own type byte or length does), and no other.
// badblocks (badblocks.py) has five edited blocks at 00:00:01.5; in
// testdata/pcp-qa, TZ=UTC `pmdumplog badblocks` prints the four refused
// in hex after what it makes of them:
//
//	245.0.3 (types.i64): value 9223372036854775807 [ffffffffffffff7f]
//	245.0.4 (types.u64): value 72057594037936128
//	245.0.5 (types.float): value 360288006688473088 1.34498551922012e-284 [0000807f08000005]
//	245.0.6 (types.double): value 0 [00000000]
//	245.0.7 (types.string): value [706c61696e00]
//
// (types.u64's type byte 0 is accepted; docs/libpcp-differences.md says
// why its value differs.)
func TestEncodingRefusedRaw(t *testing.T) {
	for _, name := range []string{"logsummary-bug", "archive-20141125-000009", "badblocks"} {
		t.Run(name, func(t *testing.T) {
			want := map[string]bool{}
			f, err := os.Open(filepath.Join(qaDir, name+".conv.txt"))
			if err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if fs := strings.Fields(sc.Text()); len(fs) == 3 {
					want[fs[0]+" "+fs[1]] = true
				}
			}
			f.Close()
			a := openQA(t, name)
			r := a.Records()
			defer r.Close()
			got := map[string]bool{}
			values := 0
			for r.Next() {
				rec := r.Record()
				for _, s := range rec.Sets {
					values += len(s.Values)
					if s.Err == nil {
						continue
					}
					if !errors.Is(s.Err, semantics.PMError(pcplog.PMErrConv)) {
						continue // an error code pmlogger logged
					}
					if s.Err != pcplog.ErrEncoding && s.Err != pcplog.ErrValueBlock || len(s.Values) > 0 {
						t.Errorf("%v %s: %v with %d values", rec.Time, a.Name(s.PMID), s.Err, len(s.Values))
					}
					got[fmt.Sprintf("%d.%06d %s", rec.Time.Unix(), rec.Time.Nanosecond()/1000, a.Name(s.PMID))] = true
				}
			}
			if err := r.Err(); err != nil {
				t.Fatal(err)
			}
			var missing, extra []string
			for k := range want {
				if !got[k] {
					missing = append(missing, k)
				}
			}
			for k := range got {
				if !want[k] {
					extra = append(extra, k)
				}
			}
			slices.Sort(missing)
			slices.Sort(extra)
			if len(missing) > 0 || len(extra) > 0 || len(want) == 0 {
				t.Errorf("value sets refused: %d, libpcp %d; not refused %.5q; refused though libpcp reads them %.5q", len(got), len(want), missing, extra)
			}
			t.Logf("%d value sets refused as libpcp does; %d values read", len(got), values)
		})
	}
}

// TestEncodingRefusedInterpolating: an interpolating fetch whose search for
// bounds meets such a value set of a metric asked fails with PM_ERR_LOGREC,
// as libpcp's; the other metrics interpolate. In testdata/pcp-qa (TZ=UTC):
//
//	pmval -a logsummary-bug -t 5sec kernel.all.cpu.wait.total
//	  -> no value, "pmval: pmFetch: Corrupted record in a PCP archive log"
//	pmval -a archive-20141125-000009 -t 60sec -S @02:00:00 mem.util.used
//	  -> 02:00:00.000 and 02:01:00.000 "No values available", then
//	     "pmval: pmFetch: Corrupted record in a PCP archive log"
//	pmval -a archive-20141125-000009 -t 60sec -S @02:00:00 -f 0 kernel.all.nprocs
//	  -> none at 02:00-02:03, then 1318729152 33 33 33 1318793088, none at 02:09
//	pmval -a archive-20141125-000009 -t 10sec -S @02:00:00 kernel.all.load
//	  -> "No values available" at 02:00:00 ... 02:01:40, then
//	     "pmval: pmFetch: Corrupted record in a PCP archive log"
//
// The last is a FLOAT metric, which may come in place or in value blocks,
// logged in blocks at 02:01:46 and in place from 02:02:46 on: libpcp's
// update_bounds keeps the encoding of the first values it reads of a
// metric and refuses a record whose values of it come in another one.
func TestEncodingRefusedInterpolating(t *testing.T) {
	at := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	for _, c := range []struct {
		archive, metric string
		start           time.Time // zero: the archive's start
		step            time.Duration
		want            []string // values per fetch; "corrupt": the fetch fails, and the last
	}{
		{"logsummary-bug", "kernel.all.cpu.wait.total", time.Time{}, 5 * time.Second, []string{"corrupt"}},
		{"archive-20141125-000009", "mem.util.used", at("2014-11-24T02:00:00Z"), time.Minute, []string{"", "", "corrupt"}},
		{"archive-20141125-000009", "kernel.all.nprocs", at("2014-11-24T02:00:00Z"), time.Minute,
			[]string{"", "", "", "", "1318729152", "33", "33", "33", "1318793088", ""}},
		{"archive-20141125-000009", "kernel.all.load", at("2014-11-24T02:00:00Z"), time.Minute, []string{"", "", "corrupt"}},
		{"archive-20141125-000009", "kernel.all.load", at("2014-11-24T02:00:00Z"), 10 * time.Second,
			[]string{"", "", "", "", "", "", "", "", "", "", "", "corrupt"}},
	} {
		a := openQA(t, c.archive)
		rp, err := NewReplay([]*pcplog.Archive{a}, ReplayOptions{Interp: semantics.InterpPrior})
		if err != nil {
			t.Fatal(err)
		}
		p, ok := a.Lookup(c.metric)
		if !ok {
			t.Fatalf("%s: no %s", c.archive, c.metric)
		}
		start := c.start
		if start.IsZero() {
			start = rp.Start()
		}
		var got []string
		for i := range c.want {
			var res source.Result
			err := rp.Fetch(start.Add(time.Duration(i)*c.step), []semantics.PMID{p}, &res)
			if err != nil {
				if !errors.Is(err, semantics.PMError(pcplog.PMErrLogRec)) || !strings.Contains(err.Error(), c.archive) {
					t.Errorf("%s %s: fetch %d: %v, want Corrupted record naming the archive", c.archive, c.metric, i, err)
				}
				got = append(got, "corrupt")
				break
			}
			v := ""
			if len(res.Sets) == 1 && res.Sets[0].Err == nil && len(res.Sets[0].Values) == 1 {
				v = strconv.FormatFloat(res.Sets[0].Values[0].Value.Float64(), 'f', -1, 64)
			}
			got = append(got, v)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s %s: %q, libpcp %q", c.archive, c.metric, got, c.want)
		}
		rp.Close()
	}
}

// TestValueBlockInterpolated: libpcp's interpolation reads a number from a
// value block by the metric's type, whatever the block's own type byte and
// length say, so the blocks pmExtractValue refuses read as is (see
// TestEncodingRefusedRaw) interpolate as the unedited archive's. In
// testdata/pcp-qa, TZ=UTC, for M in types.i64 types.float types.double:
//
//	pmval -a badblocks -S +1.5 -t 1 -s 3 -f 0 $M
//	  -> 9223372036854775807 (i64), inf (float, double) at 1.5, 2.5 and 3.5
func TestValueBlockInterpolated(t *testing.T) {
	a := openQA(t, "badblocks")
	for _, c := range []struct {
		metric string
		want   string
	}{
		{"types.i64", "9223372036854775807"},
		{"types.float", "+Inf"},
		{"types.double", "+Inf"},
	} {
		rp, err := NewReplay([]*pcplog.Archive{a}, ReplayOptions{Interp: semantics.InterpPrior})
		if err != nil {
			t.Fatal(err)
		}
		p, ok := a.Lookup(c.metric)
		if !ok {
			t.Fatalf("no %s", c.metric)
		}
		for _, off := range []time.Duration{1500 * time.Millisecond, 2500 * time.Millisecond, 3500 * time.Millisecond} {
			var res source.Result
			if err := rp.Fetch(rp.Start().Add(off), []semantics.PMID{p}, &res); err != nil {
				t.Fatalf("%s at +%v: %v", c.metric, off, err)
			}
			got := "none"
			if len(res.Sets) == 1 && res.Sets[0].Err == nil && len(res.Sets[0].Values) == 1 {
				v := res.Sets[0].Values[0].Value
				if v.Type() == semantics.Type64 {
					got = strconv.FormatInt(v.Int64(), 10)
				} else {
					got = strconv.FormatFloat(v.Float64(), 'g', -1, 64)
				}
			}
			if got != c.want {
				t.Errorf("%s at +%v: %s, pmval %s", c.metric, off, got, c.want)
			}
		}
		rp.Close()
	}
}

package pcplog

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/source/archive/internal/archivetest"
)

// TestHeadsMatchRecords: the heads sparse reading walks (type heads, one
// read per record after the first) give each record's offset, length and
// time as decoding the volume does, record after record, for every plain
// volume of the sparse timelines (framing-broken copies included, up to
// the first record the reader rejects); a head read alone, without the
// header the previous read brought, is the same.
func TestHeadsMatchRecords(t *testing.T) {
	_, sets, _ := archivetest.Timelines(t, Open)
	compared := 0
	for _, as := range sets {
		for _, a := range as {
			type decoded struct {
				t   time.Time
				off int64
			}
			// the records the reader decodes, per volume, in file order
			recs := map[int][]decoded{}
			rd := a.Records()
			for rd.Next() {
				rec := rd.Record()
				recs[rec.Vol] = append(recs[rec.Vol], decoded{rec.Time, rec.Off})
			}
			rd.Close()
			hl := a.Records().hdrSize
			for _, vf := range a.state().vols {
				if compressionOf(vf.path) != "" {
					continue
				}
				f, err := os.Open(vf.path)
				if err != nil {
					t.Fatal(err)
				}
				walk := heads{f: f, hl: hl, b: make([]byte, hl+4)}
				pos := int64(LabelSize(a.Label().Version))
				for i, d := range recs[vf.num] {
					e := walk.at(pos)
					alone := heads{f: f, hl: hl, b: make([]byte, hl+4)}
					if got := alone.at(pos); got != e {
						t.Fatalf("%s at %d: head read alone %+v, walked %+v", vf.path, pos, got, e)
					}
					tm := TimeV2(e.tb[:])
					if a.Label().Version == 3 {
						tm = TimeV3(e.tb[:])
					}
					if e.end || !e.trailer || pos != d.off || !tm.Equal(d.t) {
						t.Fatalf("%s record %d: head %+v at %d (time %v), decoded at %d (time %v)", vf.path, i, e, pos, tm, d.off, d.t)
					}
					pos += int64(e.len)
					compared++
				}
				f.Close()
			}
		}
	}
	if compared < 1000 {
		t.Errorf("only %d heads compared", compared)
	}
	t.Logf("%d heads compared", compared)
}

// TestTailsReadAhead: the runs' ends read ahead (see tails) are handed over
// only for a run ending at the offset predicted, of the same file, and
// holding its last record whole; a wrong prediction gives nothing (the
// caller reads) and the predictions start again from the run found.
func TestTailsReadAhead(t *testing.T) {
	data := make([]byte, 20000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	path := filepath.Join(t.TempDir(), "vol")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	other, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tl := StartTails()
	defer tl.Stop()
	used0, missed0 := tailsUsed.Load(), tailsMissed.Load()
	const jLen, want = 300, 600
	for _, c := range []struct {
		f    *os.File
		off  int64
		want bool // bytes handed over
	}{
		{f, 1000, false}, // no stride known yet
		{f, 2000, false}, // predicts 3000, 4000, 5000, 6000
		{f, 3000, true},
		{f, 4000, true},
		{f, 4500, false},     // wrong: predicts again from 4500, stride 500
		{f, 5000, true},      // 5000, 5500, 6000, 6500
		{other, 5500, false}, // another file at the predicted offset
		{other, 6000, false},
		{other, 6500, true},
		{other, 19800, false}, // wrong, stride 13300
		{other, 19300, false}, // wrong, going back: no prediction
		{other, 19400, false}, // stride 100: 19500, 19600, 19700, 19800
		{other, 19500, true},  // 500 bytes of 600: j whole
		{other, 19600, true},
		{other, 19700, true},  // j only
		{other, 19800, false}, // 200 bytes of j's 300 (the file ends)
	} {
		for len(tl.got) < tl.inflight { // the goroutine done (else not waited for)
			time.Sleep(time.Millisecond)
		}
		tl.heads(c.f, c.off-100) // runs from 100 bytes before their ends
		b := tl.take(c.f, 20, c.off-100, c.off, jLen, want)
		if (b != nil) != c.want {
			t.Fatalf("take at %d: got %d bytes, want bytes: %v", c.off, len(b), c.want)
		}
		if b != nil && !slices.Equal(b, data[c.off:min(c.off+want, int64(len(data)))]) {
			t.Fatalf("take at %d: the bytes are not the file's there", c.off)
		}
		if b != nil {
			tl.swapped(b)
		}
	}
	if used, missed := tailsUsed.Load()-used0, tailsMissed.Load()-missed0; used != 7 || missed != 4 {
		t.Errorf("%d reads used, %d predicted wrongly; want 7 and 4", used, missed)
	}
}

package pcplog

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pcp-exporter/pcp-exporter/internal/longtest"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/archive/internal/archivetest"
)

// TestReaderOnly checks that a filtered Reader returns exactly the wanted
// value sets of every record, equal to the unfiltered ones, marks kept.
func TestReaderOnly(t *testing.T) {
	for _, rel := range []string{"live/live", "marks/marks", "types/types_v3", "mmvchurn/mmvchurn"} {
		a, err := Open(filepath.Join(corpus, "archives", rel))
		if err != nil {
			t.Fatal(err)
		}
		ms := a.Metrics()
		want := map[semantics.PMID]bool{}
		for i, m := range ms {
			if i%3 == 0 {
				want[m.Desc.PMID] = true
			}
		}
		all, some := a.Records(), a.Records()
		some.Only(func(p semantics.PMID) bool { return want[p] })
		n := 0
		for all.Next() {
			if !some.Next() {
				t.Fatalf("%s: filtered reader ended early", rel)
			}
			ra, rs := all.Record(), some.Record()
			if !ra.Time.Equal(rs.Time) || ra.Mark != rs.Mark {
				t.Fatalf("%s: record %d differs: %v/%v %v/%v", rel, n, ra.Time, rs.Time, ra.Mark, rs.Mark)
			}
			var exp []string
			for _, s := range ra.Sets {
				if want[s.PMID] {
					exp = append(exp, setKey(s.PMID, s.Err, s.Values))
				}
			}
			var got []string
			for _, s := range rs.Sets {
				got = append(got, setKey(s.PMID, s.Err, s.Values))
			}
			if len(exp) != len(got) {
				t.Fatalf("%s: record %d: %d sets, want %d", rel, n, len(got), len(exp))
			}
			for i := range exp {
				if exp[i] != got[i] {
					t.Fatalf("%s: record %d set %d: %s, want %s", rel, n, i, got[i], exp[i])
				}
			}
			n++
		}
		if some.Next() || all.Err() != nil || some.Err() != nil {
			t.Fatalf("%s: %v %v", rel, all.Err(), some.Err())
		}
		all.Close()
		some.Close()
		a.Close()
	}
}

func setKey(p semantics.PMID, err error, vals []source.InstValue) string {
	s := p.String()
	if err != nil {
		return s + " " + err.Error()
	}
	for _, v := range vals {
		s += " " + archivetest.ValueText(v.Value)
	}
	return s
}

// restrictedRun reads every record of the archive at base restricted to
// want and returns them as text, the error last.
func restrictedRun(t *testing.T, base string, want map[semantics.PMID]bool, max int, walkAll bool) (rows []string, fast int) {
	t.Helper()
	a, err := Open(base)
	if err != nil {
		return []string{"open: " + err.Error()}, 0
	}
	defer a.Close()
	r := a.Records()
	defer r.Close()
	r.Only(func(p semantics.PMID) bool { return want[p] })
	r.walkAll = walkAll
	for len(rows) < max && r.Next() {
		rec := r.Record()
		row := fmt.Sprintf("%d %v %d/%d", rec.Time.UnixNano(), rec.Mark, rec.Vol, rec.Off)
		for _, s := range rec.Sets {
			row += " | " + setKey(s.PMID, s.Err, s.Values)
		}
		rows = append(rows, row)
	}
	if err := r.Err(); err != nil {
		rows = append(rows, "error: "+err.Error())
	}
	return rows, r.fastVisits
}

// TestReaderOnlyLayout: a restricted reader visits only the kept value sets
// of a record laid out as the previous one; it must return what the
// set-by-set walk returns, records, values and errors alike, on corpus
// archives and on copies (v2 and v3) with any byte of the first records
// corrupted (every ninth byte without PCPX_LONG_TESTS or under -race).
func TestReaderOnlyLayout(t *testing.T) {
	t.Parallel()
	fast := 0
	for _, rel := range []string{"live/live", "marks/marks", "types/types_v3", "mmvchurn/mmvchurn", "mmvchurn/mmvchurn_v3", "seedtables/seedtables"} {
		src := filepath.Join(corpus, "archives", rel)
		a, err := Open(src)
		if err != nil {
			t.Fatal(err)
		}
		ms := a.Metrics()
		a.Close()
		for k, pick := range []func(i int) bool{
			func(i int) bool { return i%3 == 0 },
			func(i int) bool { return i == len(ms)-1 },
			func(i int) bool { return i%2 == 1 },
		} {
			want := map[semantics.PMID]bool{}
			for i, m := range ms {
				if pick(i) {
					want[m.Desc.PMID] = true
				}
			}
			compare := func(base, what string, max int) {
				exp, _ := restrictedRun(t, base, want, max, true)
				got, n := restrictedRun(t, base, want, max, false)
				fast += n
				if strings.Join(got, "\n") != strings.Join(exp, "\n") {
					t.Fatalf("%s subset %d %s: the kept-sets-only visit differs from the set-by-set walk:\n got %q\nwant %q", rel, k, what, got, exp)
				}
			}
			compare(src, "as is", math.MaxInt)
			if k > 0 || (rel != "live/live" && rel != "mmvchurn/mmvchurn_v3") {
				continue
			}
			// corrupt every byte of the first five records, read up to
			// the twelfth (the visit uses a layout from the fifth on
			// in live: its 1 s and 7 s groups alternate at first)
			orig, err := os.ReadFile(src + ".0")
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			base := archivetest.CopyArchive(t, src, dir)
			lim := int(be32(orig))
			for r := 0; r < 5 && lim+4 <= len(orig); r++ {
				lim += int(be32(orig[lim:]))
			}
			b := append([]byte(nil), orig...)
			stride := 1
			if raceEnabled || !longtest.Enabled() {
				stride = 9 // coprime to 4: records and sets are 4-byte aligned, so
				// every byte position within a field is hit
			}
			for i := int(be32(orig)); i < min(lim, len(orig)); i += stride {
				b[i] = orig[i] ^ 0xff
				if err := os.WriteFile(base+".0", b, 0o644); err != nil {
					t.Fatal(err)
				}
				compare(base, fmt.Sprintf("byte %d flipped", i), 12)
				b[i] = orig[i]
			}
		}
	}
	if fast == 0 {
		t.Fatal("no record was visited at its kept sets only")
	}
	t.Logf("%d records visited at their kept sets only", fast)
}

package archive

import (
	"path/filepath"
	"testing"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
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
		s += " " + valueText(v.Value)
	}
	return s
}

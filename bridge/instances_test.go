package bridge

import (
	"testing"

	"github.com/pcp-exporter/pcp-exporter/source"
)

// TestReadInstsFind: an instance is found by id whatever order the
// lookups come in, in a domain listed in id order (as Source.Instances
// promises) and in one that is not (searched one by one); an id the
// domain lacks is not found.
func TestReadInstsFind(t *testing.T) {
	insts := func(ids ...int32) []source.Instance {
		var ins []source.Instance
		for _, id := range ids {
			ins = append(ins, source.Instance{ID: id, Name: "i" + string(rune('a'+id))})
		}
		return ins
	}
	cases := []struct {
		name    string
		ins     []source.Instance
		lookups []int32
	}{
		{"in order", insts(1, 3, 5, 7), []int32{1, 3, 5, 7}},
		{"out of order", insts(1, 3, 5, 7), []int32{7, 1, 5, 3, 3, 2, 8, 0}},
		{"unsorted domain", insts(9, 2, 6, 4), []int32{2, 9, 4, 6, 5, 6, 9}},
		{"empty domain", nil, []int32{0, 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := readInsts{ins: tc.ins, sorted: isSorted(tc.ins)}
			for _, id := range tc.lookups {
				var want *source.Instance
				for i := range tc.ins {
					if tc.ins[i].ID == id {
						want = &tc.ins[i]
					}
				}
				if got := r.find(id); got != want {
					t.Errorf("find(%d) = %v, want %v", id, got, want)
				}
			}
		})
	}
}

func isSorted(ins []source.Instance) bool {
	for i := 1; i < len(ins); i++ {
		if ins[i-1].ID >= ins[i].ID {
			return false
		}
	}
	return true
}

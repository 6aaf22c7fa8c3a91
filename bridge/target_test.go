package bridge

import (
	"fmt"
	"testing"

	"github.com/pcp-exporter/pcp-exporter/mapping"
)

// TestMergeTargets: the sources of one host (the same hostname) are one
// target_info, their labels merged (the first source's value wins); other
// hosts stay apart; empty and repeated targets go.
func TestMergeTargets(t *testing.T) {
	lp := func(kv ...string) []mapping.LabelPair {
		var out []mapping.LabelPair
		for i := 0; i < len(kv); i += 2 {
			out = append(out, mapping.LabelPair{Name: kv[i], Value: kv[i+1]})
		}
		return out
	}
	pmcd := lp("domainname", "localdomain", "hostname", "vm", "machineid", "3d12", "userid", "0")
	mmv := lp("hostname", "vm")
	for _, c := range []struct {
		name string
		in   [][]mapping.LabelPair
		want string
	}{
		{"pmcd and its MMV directory", [][]mapping.LabelPair{pmcd, mmv}, `[[{domainname localdomain} {hostname vm} {machineid 3d12} {userid 0}]]`},
		{"MMV directory first", [][]mapping.LabelPair{mmv, pmcd}, `[[{domainname localdomain} {hostname vm} {machineid 3d12} {userid 0}]]`},
		{"MMV-only sidecar", [][]mapping.LabelPair{mmv}, `[[{hostname vm}]]`},
		{"pmcd still down", [][]mapping.LabelPair{nil, mmv}, `[[{hostname vm}]]`},
		{"two hosts", [][]mapping.LabelPair{pmcd, lp("hostname", "db1", "machineid", "77")}, `[[{domainname localdomain} {hostname vm} {machineid 3d12} {userid 0}] [{hostname db1} {machineid 77}]]`},
		{"one host, differing values", [][]mapping.LabelPair{lp("hostname", "vm", "machineid", "a"), lp("hostname", "vm", "machineid", "b", "agent", "linux")}, `[[{agent linux} {hostname vm} {machineid a}]]`},
		{"no hostname", [][]mapping.LabelPair{lp("service", "x"), lp("service", "x"), lp("service", "y")}, `[[{service x}] [{service y}]]`},
	} {
		if got := fmt.Sprint(mergeTargets(c.in)); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

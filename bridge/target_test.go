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
		if got := fmt.Sprint(mergeTargets(c.in, nil)); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// TestMergeTargetsDomainLabels: a label from one source's domain labels
// (the MMV directory's agent="mmv", there only while it holds files)
// stays out of the host's merged target_info, which so does not change as
// MMV applications come and go (12 series created in 10 minutes of
// scripts/lean-compare.sh with the system MMV directory: the host's
// target_info with and without agent="mmv"); a single source keeps it,
// and sources that all have it keep it.
func TestMergeTargetsDomainLabels(t *testing.T) {
	pmcd := []mapping.LabelPair{{Name: "hostname", Value: "vm"}, {Name: "machineid", Value: "3d12"}}
	mmvEmpty := []mapping.LabelPair{{Name: "hostname", Value: "vm"}}
	mmvFiles := []mapping.LabelPair{{Name: "agent", Value: "mmv"}, {Name: "hostname", Value: "vm"}}
	agent := []string{"agent"}
	for _, c := range []struct {
		name    string
		in      [][]mapping.LabelPair
		domains [][]string
		want    string
	}{
		{"pmcd, empty MMV directory", [][]mapping.LabelPair{pmcd, mmvEmpty}, [][]string{nil, nil}, `[[{hostname vm} {machineid 3d12}]]`},
		{"pmcd, MMV directory with files", [][]mapping.LabelPair{pmcd, mmvFiles}, [][]string{nil, agent}, `[[{hostname vm} {machineid 3d12}]]`},
		{"MMV-only sidecar", [][]mapping.LabelPair{mmvFiles}, [][]string{agent}, `[[{agent mmv} {hostname vm}]]`},
		{"two sources of one agent", [][]mapping.LabelPair{append([]mapping.LabelPair{{Name: "agent", Value: "linux"}}, pmcd...), append([]mapping.LabelPair{{Name: "agent", Value: "linux"}}, pmcd...)[:2]}, [][]string{agent, agent}, `[[{agent linux} {hostname vm} {machineid 3d12}]]`},
	} {
		if got := fmt.Sprint(mergeTargets(c.in, c.domains)); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

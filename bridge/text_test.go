package bridge

import (
	"bytes"
	"sort"
	"strings"
	"testing"

	"github.com/pcp-exporter/pcp-exporter/mapping"
)

// TestWriteTextMatchesClientGolang checks that the fast text path writes
// the same lines as client_golang's encoder for every corpus source, with
// both namings.
func TestWriteTextMatchesClientGolang(t *testing.T) {
	lines := func(b []byte) []string {
		var out []string
		for _, l := range strings.Split(string(volatile.ReplaceAll(b, []byte("$1$2 <volatile>"))), "\n") {
			// client_golang writes "# HELP name " for no help; the fast
			// path leaves the line out, as pmproxy does
			if l != "" && !strings.Contains(l, "pcp_exporter_") && !(strings.HasPrefix(l, "# HELP ") && strings.Count(l, " ") == 3 && strings.HasSuffix(l, " ")) {
				out = append(out, l)
			}
		}
		sort.Strings(out)
		return out
	}
	for name, open := range corpusSources(t) {
		for _, naming := range []mapping.Naming{mapping.NamingDefault, mapping.NamingPmproxy} {
			t.Run(name+"/"+naming.String(), func(t *testing.T) {
				src := open()
				want := lines(exposition(t, New(mapper(t, naming), nil, src)))
				var buf bytes.Buffer
				if err := New(mapper(t, naming), nil, src).WriteText(&buf); err != nil {
					t.Fatal(err)
				}
				got := lines(buf.Bytes())
				if strings.Join(want, "\n") != strings.Join(got, "\n") {
					t.Errorf("fast path differs:\n%s", lineDiff(strings.Join(want, "\n"), strings.Join(got, "\n")))
				}
				if len(got) == 0 {
					t.Error("no lines")
				}
			})
		}
	}
}

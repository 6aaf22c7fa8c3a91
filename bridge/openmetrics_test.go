package bridge

import (
	"bytes"
	"errors"
	"io"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"

	"github.com/pcp-exporter/pcp-exporter/mapping"
)

// clientGolangOpenMetrics renders a collector's samples through
// client_golang's registry and expfmt's OpenMetrics encoder, with _created
// lines if created.
func clientGolangOpenMetrics(t testing.TB, c prometheus.Collector, created bool) []byte {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	var opts []expfmt.EncoderOption
	if created {
		opts = append(opts, expfmt.WithCreatedLines())
	}
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToOpenMetrics(&b, mf, opts...); err != nil {
			t.Fatal(err)
		}
	}
	expfmt.FinalizeOpenMetrics(&b)
	return b.Bytes()
}

// parseOpenMetrics runs Prometheus's own OpenMetrics parser over b to the
// end and returns the number of samples; any error fails the test.
func parseOpenMetrics(t testing.TB, b []byte) int {
	t.Helper()
	p := textparse.NewOpenMetricsParser(b, labels.NewSymbolTable())
	n := 0
	for {
		e, err := p.Next()
		if errors.Is(err, io.EOF) {
			return n
		}
		if err != nil {
			t.Fatalf("Prometheus's OpenMetrics parser: %v", err)
		}
		if e == textparse.EntrySeries {
			n++
		}
	}
}

var (
	infoType    = regexp.MustCompile(`(?m)^# TYPE ([a-z_0-9:]+) info$`)
	unknownType = regexp.MustCompile(`(?m)^# TYPE ([a-z_0-9:]+) unknown$`)
)

// TestWriteOpenMetricsMatchesClientGolang checks that the fast path's
// OpenMetrics is what client_golang's encoder writes for the same families
// (_created lines and UNIT included) for every corpus source, with both
// namings, but for info families, which client_golang cannot type info
// (their samples are the same); that Prometheus's OpenMetrics parser reads
// it to the end; and the golden files. (promtool check metrics of
// Prometheus 2.42 reads the text format only: TestGoldenExposition runs it.)
// client_golang writes _created lines for a counter without _total too,
// which it types unknown and whose _created series Prometheus's parser
// refuses; the fast path leaves them out.
func TestWriteOpenMetricsMatchesClientGolang(t *testing.T) {
	lines := func(b []byte, infos, unknown []string) []string {
		s := string(volatile.ReplaceAll(b, []byte("$1$2 <volatile>")))
		for _, n := range infos {
			s = strings.ReplaceAll(s, "# TYPE "+n+"_info gauge\n", "# TYPE "+n+" info\n")
			s = strings.ReplaceAll(s, "# HELP "+n+"_info ", "# HELP "+n+" ")
		}
		var out []string
		for _, l := range strings.Split(s, "\n") {
			// client_golang writes "# HELP name " for no help; the fast
			// path leaves the line out, as pmproxy does
			if l != "" && !(strings.HasPrefix(l, "# HELP ") && strings.Count(l, " ") == 3 && strings.HasSuffix(l, " ")) && !createdOf(l, unknown) {
				out = append(out, l)
			}
		}
		sort.Strings(out)
		return out
	}
	for name, open := range corpusSources(t) {
		for _, naming := range []mapping.Naming{mapping.NamingDefault, mapping.NamingPmproxy} {
			for _, created := range []bool{false, true} {
				sub := name + "/" + naming.String()
				if created {
					sub += "/created"
				}
				t.Run(sub, func(t *testing.T) {
					src := open()
					var buf bytes.Buffer
					if err := New(mapper(t, naming), nil, src).WriteOpenMetrics(&buf, created); err != nil {
						t.Fatal(err)
					}
					buf.WriteString("# EOF\n")
					got := buf.Bytes()
					var infos, unknown []string
					for _, m := range infoType.FindAllSubmatch(got, -1) {
						infos = append(infos, string(m[1]))
					}
					for _, m := range unknownType.FindAllSubmatch(got, -1) {
						unknown = append(unknown, string(m[1]))
					}
					want := lines(clientGolangOpenMetrics(t, SamplesOnly(New(mapper(t, naming), nil, src)), created), infos, unknown)
					if w, g := strings.Join(want, "\n"), strings.Join(lines(got, nil, nil), "\n"); w != g {
						t.Errorf("fast path differs from client_golang:\n%s", lineDiff(w, g))
					}
					if n := parseOpenMetrics(t, got); n == 0 {
						t.Error("no samples")
					}
					if created != bytes.Contains(got, []byte("_created")) && naming == mapping.NamingDefault {
						t.Errorf("created %v, but _created samples: %v", created, !created)
					}
					if !created {
						golden(t, name+"."+naming.String()+".om", got)
					}
				})
			}
		}
	}
}

// createdOf reports whether line is a _created sample of one of families.
func createdOf(line string, families []string) bool {
	for _, f := range families {
		if strings.HasPrefix(line, f+"_created{") || strings.HasPrefix(line, f+"_created ") {
			return true
		}
	}
	return false
}

package bridge

import (
	"io"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/source/pmcd"
)

// TestPMCDMetricErrors reads metrics of the local pmcd of which some are
// answered with an error (here swap.in and swap.out: PM_ERR_APPVERSION),
// and checks the self-metrics (source.MetricErrorer) against what pminfo
// -f prints for the same metrics, with pmerr -l's codes.
func TestPMCDMetricErrors(t *testing.T) {
	e2e.Require(t, "pmerr")
	e2e.RequirePMCD(t)
	names := []string{"swap.in", "swap.out", "kernel.all.load"}

	codes := map[string]string{} // message -> code
	out, err := exec.Command("pmerr", "-l").Output()
	if !strings.Contains(string(out), "PM_ERR_APPVERSION") { // pmerr -l exits 1 (PCP 6.0.x), having listed them
		t.Fatalf("pmerr -l: %v\n%s", err, out)
	}
	for _, m := range regexp.MustCompile(`(?m)^\s*(-\d+)\s+\S+\s+(.+?)\s*$`).FindAllStringSubmatch(string(out), -1) {
		codes[m[2]] = m[1]
	}
	out, err = exec.Command("pminfo", append([]string{"-f"}, names...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("pminfo -f: %v\n%s", err, out)
	}
	want := map[string]int{} // code -> metrics
	errs := 0
	for _, m := range regexp.MustCompile(`(?m)^Error: (.+)$`).FindAllStringSubmatch(string(out), -1) {
		c, ok := codes[m[1]]
		if !ok {
			t.Fatalf("pminfo's error %q is not in pmerr -l", m[1])
		}
		want[c]++
		errs++
	}
	t.Logf("pminfo -f %s: %d errors %v", strings.Join(names, " "), errs, want)

	sel, err := pmcd.ParseSelection(names)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pmcd.Open("local:", pmcd.Options{Selection: sel, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	m, err := mapping.New(nil, mapping.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const name = "pmcd local"
	col := New(m, nil, Source{Name: name, Src: p})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col.Self())
	for read := 1; read <= 2; read++ {
		if err := col.WriteText(io.Discard); err != nil {
			t.Fatal(err)
		}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		total := -1.0
		for _, mf := range mfs {
			for _, s := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range s.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["source"] != name {
					t.Errorf("%s: source %q, want %q", mf.GetName(), labels["source"], name)
				}
				switch mf.GetName() {
				case "pcp_exporter_pmcd_metric_errors":
					got[labels["code"]] = int(s.GetGauge().GetValue())
				case "pcp_exporter_pmcd_metric_errors_total":
					total = s.GetCounter().GetValue()
				}
			}
		}
		if len(got) != len(want) {
			t.Errorf("read %d: pcp_exporter_pmcd_metric_errors by code %v, pminfo %v", read, got, want)
		}
		for c, n := range want {
			if got[c] != n {
				t.Errorf("read %d: pcp_exporter_pmcd_metric_errors{code=%q} %d, pminfo %d", read, c, got[c], n)
			}
		}
		if total != float64(read*errs) {
			t.Errorf("read %d: pcp_exporter_pmcd_metric_errors_total %v, want %d (%d a read)", read, total, read*errs, errs)
		}
	}
}

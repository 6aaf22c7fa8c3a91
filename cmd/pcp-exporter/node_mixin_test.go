package main

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
)

// TestNodeMixinRules: promtool accepts node-mixin's rules and alerts as
// rendered for a PCP host (mixin/node), and its unit test passes: input
// series from a real scrape of serve --naming node (written by
// TestNodeProfileAgainstNodeExporter -update-node-mixin-tests), expected
// values computed from those series as the rules define them.
func TestNodeMixinRules(t *testing.T) {
	promtool := e2e.Require(t, "promtool")[0]
	for _, args := range [][]string{
		{"check", "rules", "rules.yaml", "alerts.yaml"},
		{"test", "rules", "tests.yaml"},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = nodeMixinDir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// nodeMixinInputs are the families of the rules' unit test.
var nodeMixinInputs = []string{
	"node_cpu_seconds_total", "node_load1", "node_memory_MemAvailable_bytes", "node_memory_MemTotal_bytes",
	"node_filesystem_avail_bytes", "node_filesystem_size_bytes", "node_filesystem_readonly",
	"node_filesystem_files", "node_filesystem_files_free", "node_filefd_allocated", "node_filefd_maximum",
}

// writeNodeMixinTests writes mixin/node/tests.yaml: the series of the
// pcpnode job over its last 150 s at a 15 s step (renamed job="node", as
// the rendered rules select), with the expected values of the rules that
// need no rate: the CPU count, the memory utilisation and the load per
// CPU at the last step, and the filesystem and fd alerts not firing.
func writeNodeMixinTests(t *testing.T, prom string, end time.Time) {
	const steps = 10
	start := end.Add(-steps * 15 * time.Second)
	type series struct {
		labels string
		vals   []string
	}
	var in []series
	last := map[string]float64{} // family (or family + labels) -> value at end
	for _, fam := range nodeMixinInputs {
		var d struct {
			Result []struct {
				Metric map[string]string
				Values [][2]any
			}
		}
		q := url.Values{"query": {fam + `{job="pcpnode"}`}, "start": {strconv.FormatInt(start.Unix(), 10)}, "end": {strconv.FormatInt(end.Unix(), 10)}, "step": {"15"}}
		e2e.PromAPI(t, prom+"/api/v1/query_range?"+q.Encode(), &d)
		for _, r := range d.Result {
			if len(r.Values) != steps+1 {
				t.Fatalf("%s: %d samples, want %d", fam, len(r.Values), steps+1)
			}
			r.Metric["job"] = "node"
			r.Metric["instance"] = "pcp-host:9464"
			delete(r.Metric, "host")
			var ks []string
			for k, v := range r.Metric {
				if k != "__name__" {
					ks = append(ks, k+"="+strconv.Quote(v))
				}
			}
			sort.Strings(ks)
			s := series{labels: fam + "{" + strings.Join(ks, ", ") + "}"}
			for _, v := range r.Values {
				s.vals = append(s.vals, v[1].(string))
			}
			in = append(in, s)
			x, _ := strconv.ParseFloat(s.vals[steps], 64)
			last[fam] = x
			if fam == "node_cpu_seconds_total" && r.Metric["mode"] == "idle" {
				last["cpus"]++
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# promtool test rules tests.yaml: node-mixin's rules on a real scrape of\n")
	fmt.Fprintf(&b, "# `pcp-exporter serve --naming node` (PCP 6.0.3, Debian 12), written by\n")
	fmt.Fprintf(&b, "# go test ./cmd/pcp-exporter -run TestNodeProfileAgainstNodeExporter -update-node-mixin-tests\n")
	fmt.Fprintf(&b, "# (PCPX_LONG_TESTS=1). Expected values: the rules' formulas on these series.\n")
	fmt.Fprintf(&b, "rule_files: [rules.yaml, alerts.yaml]\nevaluation_interval: 15s\ntests:\n  - interval: 15s\n    input_series:\n")
	for _, s := range in {
		fmt.Fprintf(&b, "      - series: '%s'\n        values: '%s'\n", s.labels, strings.Join(s.vals, " "))
	}
	at := fmt.Sprintf("%ds", steps*15)
	ls := `{instance="pcp-host:9464", job="node"}`
	fmt.Fprintf(&b, "    promql_expr_test:\n")
	fmt.Fprintf(&b, "      - expr: instance:node_num_cpu:sum\n        eval_time: %s\n        exp_samples: [{labels: 'instance:node_num_cpu:sum%s', value: %s}]\n", at, ls, ff(last["cpus"]))
	fmt.Fprintf(&b, "      - expr: instance:node_memory_utilisation:ratio\n        eval_time: %s\n        exp_samples: [{labels: 'instance:node_memory_utilisation:ratio%s', value: %s}]\n", at, ls, ff(1-last["node_memory_MemAvailable_bytes"]/last["node_memory_MemTotal_bytes"]))
	fmt.Fprintf(&b, "      - expr: instance:node_load1_per_cpu:ratio\n        eval_time: %s\n        exp_samples: [{labels: 'instance:node_load1_per_cpu:ratio%s', value: %s}]\n", at, ls, ff(last["node_load1"]/last["cpus"]))
	fmt.Fprintf(&b, "    alert_rule_test:\n")
	for _, a := range []string{"NodeFilesystemAlmostOutOfSpace", "NodeFilesystemAlmostOutOfFiles", "NodeFileDescriptorLimit", "NodeMemoryHighUtilization"} {
		fmt.Fprintf(&b, "      - {eval_time: %s, alertname: %s, exp_alerts: []}\n", at, a)
	}
	if err := os.WriteFile(filepath.Join(nodeMixinDir, "tests.yaml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func ff(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

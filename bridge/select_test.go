package bridge

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// TestTwoHostsAndSelection serves two archives of two hosts: the series
// keep hostname (the label that tells the sources apart), target_info has
// one series per host; name[] and names select families in the text format
// and in OpenMetrics alike.
func TestTwoHostsAndSelection(t *testing.T) {
	srcs := corpusSources(t)
	c := New(mapper(t, 0), nil, srcs["archive-seedtables"](), srcs["archive-live"]())
	reg := prometheus.NewRegistry()
	reg.MustRegister(c.Self())
	h := c.Handler(reg, prometheus.Gatherers{samplesGatherer{c: c}, reg}, promhttp.HandlerOpts{EnableOpenMetrics: true})
	srv := httptest.NewServer(h)
	defer srv.Close()
	families := regexp.MustCompile(`(?m)^# TYPE (\S+)`)
	get := func(query, accept string) (string, []string) {
		req, _ := http.NewRequest("GET", srv.URL+"/metrics?"+query, nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var fams []string
		for _, m := range families.FindAllStringSubmatch(string(b), -1) {
			fams = append(fams, m[1])
		}
		sort.Strings(fams)
		return string(b), fams
	}
	const om = "application/openmetrics-text;version=1.0.0"
	body, _ := get("", "")
	for _, want := range []string{
		`seed_total{hostname="corpus-host"} `,
		`kernel_all_load{hostname="vm",instname="1 minute"} `,
		`target_info{hostname="corpus-host"} 1`,
		`target_info{domainname="localdomain",groupid="0",hostname="vm",machineid="3d1219c7c4c5404aaa1f6d2a48adfda4",userid="0"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("missing %q in\n%s", want, body)
		}
	}
	for _, accept := range []string{"", om} {
		for _, tc := range []struct{ query, want string }{
			{"name[]=kernel_all_load&name[]=seed_total&name[]=pcp_exporter_source_up", "kernel_all_load pcp_exporter_source_up seed"},
			{"names=kernel.all.cpu.user,mem.util.used&name[]=mem_util_used_bytes", "mem_util_used_bytes"},
			{"names=kernel.all.cpu&names=disk.dev.read_bytes&name[]=target_info", "target_info"},
			{"names=kernel.all.cpu.user&names=disk.dev.read_bytes", "disk_dev_read_bytes kernel_all_cpu_user_seconds pcp_exporter_metrics_exported pcp_exporter_source_errors pcp_exporter_source_fetch_duration_seconds pcp_exporter_source_served_timestamp_seconds pcp_exporter_source_up target_info"},
		} {
			_, fams := get(tc.query, accept)
			got := strings.Join(fams, " ")
			if accept == "" {
				got = strings.NewReplacer("_total", "").Replace(got)
			}
			if got != tc.want {
				t.Errorf("%s (%q): families\n %s\nwant\n %s", tc.query, accept, got, tc.want)
			}
		}
	}
}

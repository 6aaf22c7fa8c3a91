package probe

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
	"github.com/pcp-exporter/pcp-exporter/mapping"
)

// TestModuleNaming: each module's naming names a private pmcd's metrics
// on /probe (node: node_exporter's node_load1, pmproxy: pmproxy's instid
// label, hostmetrics: the Collector's system_cpu_load_average_1m, none:
// serve's naming), and a reload of the file changes a module's naming.
func TestModuleNaming(t *testing.T) {
	p := e2e.StartPMCD(t, e2e.PMCDConfig{Agents: e2e.DSOAgents})
	const modules = "probe: {allow: [127.0.0.1]}\nmodules:\n  default: {metrics: [kernel.all.load]}\n" +
		"  node: {metrics: [kernel.all.load], naming: node}\n  pmproxy: {metrics: [kernel.all.load], naming: pmproxy}\n" +
		"  hostmetrics: {metrics: [kernel.all.load], naming: hostmetrics}\n"
	file := writeConfig(t, modules)
	cfg, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	mapper, err := mapping.New(nil, mapping.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := New(cfg, mapper, nil)
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()
	probe := func(module string) string {
		t.Helper()
		resp, err := http.Get(srv.URL + "/probe?target=" + p.Addr + "&module=" + module)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !strings.Contains(string(b), "pcp_probe_success 1") {
			t.Fatalf("module %s: %s: %s", module, resp.Status, b)
		}
		return string(b)
	}
	type want struct{ has, hasNot []string }
	check := func(cases map[string]want) {
		t.Helper()
		for module, w := range cases {
			body := probe(module)
			for _, s := range w.has {
				if !strings.Contains(body, s) {
					t.Errorf("module %s: no %q in\n%s", module, s, body)
				}
			}
			for _, s := range w.hasNot {
				if strings.Contains(body, s) {
					t.Errorf("module %s: %q in\n%s", module, s, body)
				}
			}
		}
	}
	pcp := want{[]string{`kernel_all_load{instname="1 minute"} `}, []string{"node_load1", "instid="}}
	node := want{[]string{"\nnode_load1 ", "\nnode_load15 "}, []string{"kernel_all_load"}}
	check(map[string]want{
		"default":     pcp,
		"node":        node,
		"pmproxy":     {[]string{`instid="1",instname="1 minute"`}, []string{"node_load1"}},
		"hostmetrics": {[]string{"\nsystem_cpu_load_average_1m "}, []string{"kernel_all_load"}},
	})
	// the file changed: default and node swap their namings
	swapped := strings.Replace(strings.Replace(modules, "naming: node}", "naming: default}", 1), "default: {metrics: [kernel.all.load]}", "default: {metrics: [kernel.all.load], naming: node}", 1)
	if err := os.WriteFile(file, []byte(swapped), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := h.Reconfigure(mapper, nil); err != nil {
		t.Fatal(err)
	}
	check(map[string]want{"default": node, "node": pcp})
	if err := os.WriteFile(file, []byte(modules+"  bad: {naming: nodes}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := h.Reconfigure(mapper, nil); err == nil || !strings.Contains(err.Error(), `module "bad"`) || !strings.Contains(err.Error(), file) {
		t.Errorf("a bad naming: %v", err)
	}
	check(map[string]want{"default": node})
}

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pcp-exporter/pcp-exporter/mapping"
)

// TestMappingGolden checks the mapping command's table and JSON over the
// demo recording, corpus archives and MMV files, lean and full labels and
// both namings, against golden files (-update rewrites them).
func TestMappingGolden(t *testing.T) {
	host, _ := os.Hostname()
	for _, tc := range []struct {
		name     string
		mmv      string
		archives []string
		format   string
		naming   string
		full     bool
		metrics  []string
	}{
		{name: "demo.txt", archives: []string{"demo/live"}, format: "table", naming: "default"},
		{name: "demo.json", archives: []string{"demo/live"}, format: "json", naming: "default"},
		{name: "demo-full.txt", archives: []string{"demo/live"}, format: "table", naming: "default", full: true, metrics: []string{"disk", "kernel.all.load"}},
		{name: "demo-node.txt", archives: []string{"demo/live"}, format: "table", naming: "node", metrics: []string{"node_load1", "node_cpu_seconds_total", "node_memory_MemAvailable_bytes", "node_network_receive_bytes_total", "kernel.all.cpu", "kernel.uname"}},
		{name: "demo-hostmetrics.txt", archives: []string{"demo/live"}, format: "table", naming: "hostmetrics", metrics: []string{"system.cpu.time", "system.cpu.load_average.1m", "system.memory.usage", "system.network.io", "kernel.all.cpu"}},
		{name: "demo-pmproxy.txt", archives: []string{"demo/live"}, format: "table", naming: "pmproxy", metrics: []string{"disk", "kernel.all.load", "kernel.uname"}},
		{name: "types.txt", archives: []string{filepath.Join(corpus, "archives", "types", "types_v3")}, format: "table", naming: "default"},
		{name: "mmv.json", mmv: filepath.Join(mmvCorpus, "corpusv3"), format: "json", naming: "default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &mappingFlags{mmv: &mmvFlags{path: tc.mmv}, archives: tc.archives, naming: tc.naming, fullLabels: tc.full, format: tc.format, derived: &derivedFlags{}, metrics: tc.metrics}
			var out bytes.Buffer
			if err := runMapping(&out, f); err != nil {
				t.Fatal(err)
			}
			got := out.Bytes()
			if host != "" && tc.mmv != "" {
				got = bytes.ReplaceAll(got, []byte(`"`+host+`"`), []byte(`"HOSTNAME"`))
			}
			if tc.format == "json" {
				var doc mapping.Description
				if err := json.Unmarshal(got, &doc); err != nil || len(doc.Metrics) == 0 {
					t.Fatalf("not the mapping's JSON: %v", err)
				}
			}
			golden := filepath.Join("testdata", "mapping", tc.name)
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("mapping output differs from %s (run with -update after checking):\n%s", golden, got)
			}
		})
	}
	if got := run([]string{"mapping"}); got != 2 {
		t.Errorf("mapping without a source: exit %d, want 2", got)
	}
}

// TestMappingFileNaming: the mapping file's naming applies when --naming
// is not given (the flag's default used to override it), and the flag wins
// when it is.
func TestMappingFileNaming(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "mapping.yml")
	if err := os.WriteFile(cfg, []byte("naming: node\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ naming, metric, want string }{
		{"", "node_load1", "node_load1"},
		{"default", "kernel.all.load", "kernel_all_load"},
	} {
		f := &mappingFlags{mmv: &mmvFlags{}, archives: []string{"demo/live"}, naming: tc.naming, mappingFile: cfg, format: "table", derived: &derivedFlags{}, metrics: []string{tc.metric}}
		var out bytes.Buffer
		if err := runMapping(&out, f); err != nil {
			t.Fatalf("--naming=%q: %v", tc.naming, err)
		}
		if !strings.Contains(out.String(), tc.metric+" ") || !strings.Contains(out.String(), " "+tc.want+" ") {
			t.Errorf("--naming=%q: no %s as %s:\n%s", tc.naming, tc.metric, tc.want, out.String())
		}
	}
}

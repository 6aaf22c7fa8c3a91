package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"

	"github.com/pcp-exporter/pcp-exporter/mapping"
)

var (
	mmvCorpus = filepath.Join(corpus, "mmv", "files")
	// volatile parts of fetch output: the fetch time and the open ELAPSED
	// interval, which grows with time.
	timeRE    = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z`)
	runningRE = regexp.MustCompile(`(elapsed\.running(?:,,,|","values":\[\{"inst":null,"value":))\d+`)
)

// TestFetchGolden checks fetch's CSV and JSON over the corpus MMV files
// against golden files (our output; the values themselves are checked
// against pminfo by source/mmv's corpus tests).
func TestFetchGolden(t *testing.T) {
	for _, tc := range []struct {
		name, path, format string
		metrics            []string
	}{
		{"dir.csv", mmvCorpus, "csv", nil},
		{"dir.json", mmvCorpus, "json", nil},
		{"v1-subtrees.csv", filepath.Join(mmvCorpus, "corpusv1"), "csv", []string{"mmv.corpusv1.stats.names", "mmv.corpusv1.stats.elapsed", "mmv.corpusv1.stats.i32"}},
		{"v3.json", filepath.Join(mmvCorpus, "corpusv3"), "json", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := openMMV(tc.path, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			var out bytes.Buffer
			if err := fetchValues(&out, src, tc.metrics, tc.format); err != nil {
				t.Fatal(err)
			}
			switch tc.format {
			case "csv":
				rows, err := csv.NewReader(bytes.NewReader(out.Bytes())).ReadAll()
				if err != nil || len(rows) < 2 || strings.Join(rows[0], ",") != "time,metric,instance_id,instance,value" {
					t.Fatalf("not the contract's CSV (%v): %q", err, out.String())
				}
			case "json":
				var v struct {
					Time    string
					Metrics []map[string]any
				}
				if err := json.Unmarshal(out.Bytes(), &v); err != nil || len(v.Metrics) == 0 {
					t.Fatalf("not a JSON record (%v): %q", err, out.String())
				}
			}
			got := timeRE.ReplaceAll(out.Bytes(), []byte("TIME"))
			got = runningRE.ReplaceAll(got, []byte("${1}RUNNING"))
			golden := filepath.Join("..", "..", "testdata", "mmv", "fetch", tc.name)
			if *update {
				os.MkdirAll(filepath.Dir(golden), 0o755)
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("fetch output differs from %s (run with -update after checking):\n%s", golden, got)
			}
		})
	}
}

func TestFetchErrors(t *testing.T) {
	v1 := filepath.Join(mmvCorpus, "corpusv1")
	for _, tc := range []struct {
		args []string
		exit int
	}{
		{[]string{"fetch"}, 2},
		{[]string{"fetch", "--mmv", v1, "--format", "xml"}, 2},
		{[]string{"fetch", "--mmv", filepath.Join(t.TempDir(), "nope")}, 1},
		{[]string{"fetch", "--mmv", v1, "--format", "json", "mmv.corpusv1.nope"}, 1},
		// corpusv3 is a PROCESS file whose writer is gone
		{[]string{"fetch", "--mmv", filepath.Join(mmvCorpus, "corpusv3"), "--no-mmv.pid-check", "--format", "json"}, 0},
	} {
		if got := run(tc.args); got != tc.exit {
			t.Errorf("%v: exit %d, want %d", tc.args, got, tc.exit)
		}
	}
}

// TestInfoMMV checks info --mmv over the corpus MMV directory against a
// golden file (our output; the metadata is checked against pminfo by
// source/mmv's corpus tests).
func TestInfoMMV(t *testing.T) {
	src, err := openMMV(mmvCorpus, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var out bytes.Buffer
	if err := writeInfo(&out, src); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("..", "..", "testdata", "mmv", "info", "corpus-dir.json")
	if *update {
		os.MkdirAll(filepath.Dir(golden), 0o755)
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("info --mmv output differs from %s (run with -update after checking)", golden)
	}
	if got := run([]string{"info", "--mmv", filepath.Join(mmvCorpus, "corpusv1")}); got != 0 {
		t.Errorf("info --mmv FILE: exit %d", got)
	}
}

// TestFetchOpenMetrics checks fetch --format openmetrics over the corpus MMV
// files against golden files (our output; the mapping itself is checked by
// package mapping and against the real pmproxy by package bridge) and its
// OpenMetrics structure.
func TestFetchOpenMetrics(t *testing.T) {
	running := regexp.MustCompile(`(?m)^(mmv_corpusv\d_stats_elapsed_running(?:_seconds_total)?(?:\{[^}]*\})?) .*$`)
	for _, tc := range []struct {
		name, path, naming string
		metrics            []string
		created            bool
	}{
		{"dir.om", mmvCorpus, "default", nil, false},
		{"dir.created.om", mmvCorpus, "default", nil, true},
		{"dir.pmproxy.om", mmvCorpus, "pmproxy", nil, false},
		{"v1-subtrees.om", filepath.Join(mmvCorpus, "corpusv1"), "default", []string{"mmv.corpusv1.stats.names", "mmv.corpusv1.stats.elapsed", "mmv.corpusv1.stats.i32"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := openMMV(tc.path, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			mapper, err := newMapper("", tc.naming, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := fetchOpenMetrics(&out, src, tc.path, tc.metrics, mapper, tc.created, nil, []mapping.LabelPair{{Name: "hostname", Value: "testhost"}}); err != nil {
				t.Fatal(err)
			}
			if _, err := omCheck(out.Bytes()); err != nil {
				t.Fatalf("not OpenMetrics: %v\n%s", err, out.String())
			}
			got := running.ReplaceAll(out.Bytes(), []byte("$1 RUNNING"))
			golden := filepath.Join("..", "..", "testdata", "mmv", "fetch", tc.name)
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
				t.Errorf("fetch output differs from %s (run with -update after checking):\n%s", golden, got)
			}
		})
	}
	if got := run([]string{"fetch", "--mmv", mmvCorpus, "--format", "openmetrics", "--naming", "nope"}); got != 2 {
		t.Errorf("bad --naming: exit %d, want 2", got)
	}
}

// omCheck reads b with Prometheus's own OpenMetrics parser (families,
// _total, _created, _info, UNIT, # EOF) and returns the number of samples.
func omCheck(b []byte) (int, error) {
	p := textparse.NewOpenMetricsParser(b, labels.NewSymbolTable())
	n := 0
	for {
		e, err := p.Next()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if e == textparse.EntrySeries {
			n++
		}
	}
}

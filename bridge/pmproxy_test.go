package bridge

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/source/mmv"
)

// pmcdContextLabels are the labels pmcd adds to everything it serves; an
// MMV file read directly does not have them.
var pmcdContextLabels = map[string]bool{"hostname": true, "machineid": true, "domainname": true, "machineid_sha256": true}

// series flattens families into "name{labels} value" lines (labels sorted,
// pmcd's context labels left out) plus "TYPE name type" and "HELP name text".
func series(mfs map[string]*dto.MetricFamily, skip func(name string) bool) []string {
	var out []string
	for name, mf := range mfs {
		if skip(name) {
			continue
		}
		out = append(out, fmt.Sprintf("TYPE %s %s", name, strings.ToLower(mf.GetType().String())))
		if mf.GetHelp() != "" {
			out = append(out, fmt.Sprintf("HELP %s %s", name, mf.GetHelp()))
		}
		for _, m := range mf.Metric {
			var ls []string
			for _, l := range m.Label {
				if !pmcdContextLabels[l.GetName()] {
					ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
				}
			}
			sort.Strings(ls)
			v := m.GetGauge().GetValue()
			if m.Counter != nil {
				v = m.GetCounter().GetValue()
			}
			out = append(out, fmt.Sprintf("%s{%s} %v", name, strings.Join(ls, ","), v))
		}
	}
	sort.Strings(out)
	return out
}

func parseText(t *testing.T, r io.Reader) map[string]*dto.MetricFamily {
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(r)
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

// TestPmproxyNamingMatchesPmproxy puts corpus MMV files into the real pmcd's
// MMV directory and compares pmproxy's /metrics for them with the pmproxy
// naming of our collector reading the same files: names, TYPE, HELP, labels
// (but pmcd's context labels) and values.
func TestPmproxyNamingMatchesPmproxy(t *testing.T) {
	e2e.Require(t, "pminfo") // pmcd and pmproxy themselves live in /usr/lib/pcp/bin; pmproxy is reached over HTTP
	base := os.Getenv("PCP_EXPORTER_PMPROXY_URL")
	if base == "" {
		base = "http://localhost:44322"
	}
	if resp, err := http.Get(base + "/metrics?names=pmcd.version"); err != nil {
		if e2e.Mandatory() {
			t.Fatalf("pmproxy not answering at %s: %v", base, err)
		}
		t.Skipf("pmproxy not answering at %s: %v", base, err)
	} else {
		resp.Body.Close()
	}
	dir := mmv.DefaultDir()
	for _, name := range []string{"corpusv1", "corpusv2", "corpussentinel"} {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(corpus, "mmv", "files", name))
			if err != nil {
				t.Fatal(err)
			}
			// a file name of our own, so nothing else in the directory clashes
			fname := "pcpxtest" + name
			path := filepath.Join(dir, fname)
			if err := os.WriteFile(path, b, 0o644); err != nil {
				if e2e.Mandatory() {
					t.Fatal(err)
				}
				t.Skip(err)
			}
			defer os.Remove(path)
			f, err := mmv.OpenFile(path, mmv.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			ours := exposition(t, New(mapper(t, mapping.NamingPmproxy), nil, Source{Name: name, Src: f}))
			pcpPrefix := "mmv." + fname
			if name == "corpusv2" { // NOPREFIX: mmv.<metric>, its metrics named corpus_noprefix.*
				pcpPrefix = "mmv.corpus_noprefix"
			}
			prefix := strings.ReplaceAll(pcpPrefix, ".", "_")
			skip := func(n string) bool {
				return !strings.HasPrefix(n, prefix) || strings.Contains(n, "elapsed_running")
			}
			want := series(parseText(t, bytes.NewReader(ours)), skip)
			var got []string
			deadline := time.Now().Add(15 * time.Second)
			for {
				resp, err := http.Get(base + "/metrics?names=" + pcpPrefix)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				got = series(parseText(t, bytes.NewReader(body)), skip)
				if len(got) > 0 || time.Now().After(deadline) {
					break
				}
				time.Sleep(500 * time.Millisecond) // pmdammv rescans the directory
			}
			if len(want) == 0 {
				t.Fatal("our exposition has no series")
			}
			if d := rowDiffStrings(got, want); d != "" {
				t.Errorf("pmproxy (-) and our pmproxy naming (+) differ:%s", d)
			}
		})
	}
}

func rowDiffStrings(want, got []string) string {
	w, g := map[string]bool{}, map[string]bool{}
	for _, r := range want {
		w[r] = true
	}
	for _, r := range got {
		g[r] = true
	}
	var b strings.Builder
	for _, r := range want {
		if !g[r] {
			b.WriteString("\n- " + r)
		}
	}
	for _, r := range got {
		if !w[r] {
			b.WriteString("\n+ " + r)
		}
	}
	return b.String()
}

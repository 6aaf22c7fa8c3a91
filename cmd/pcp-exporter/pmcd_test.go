package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/bridge"
	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/pmcd"
)

// localPMCD opens the local pmcd (as pminfo reaches it: the unix socket),
// skipping the test when there is none unless CI=true.
func localPMCD(t *testing.T, spec string) *pmcd.Source {
	t.Helper()
	e2e.Require(t, "pminfo")
	e2e.LockPMCD(t, false) // compared with the system pmcd
	s, err := pmcd.Open(spec, pmcd.Options{Timeout: 10 * time.Second})
	if err != nil {
		if e2e.Mandatory() {
			t.Fatalf("local pmcd: %v", err)
		}
		t.Skipf("no local pmcd (set CI=true to make this a failure): %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// pminfo runs pminfo with args (no client-side derived metrics: pmcd does
// not serve them) and returns its output.
func pminfo(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("pminfo", args...)
	cmd.Env = append(os.Environ(), "PCP_DERIVED_CONFIG=")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("pminfo with %d arguments: %v: %q", len(args), err, stderr)
	}
	return string(out)
}

// pminfoMetric is what pminfo -dmTtl says of one metric.
type pminfoMetric struct {
	pmid, oneline, typ, indom, sem, units, labels string
	help                                          []string
	instLabels                                    map[string]string // "[id or \"name\"]" -> labels
}

var (
	pminfoHeader = regexp.MustCompile(`^(\S+) PMID: (\S+) \[(.*)\]$`)
	pminfoInst   = regexp.MustCompile(`^    inst (\[-?\d+ or ".*"\]) (labels|value) (.*)$`)
)

// parsePminfo parses pminfo -dmTtl (or -f) output into metrics by name.
func parsePminfo(out string) map[string]*pminfoMetric {
	ms := map[string]*pminfoMetric{}
	var m *pminfoMetric
	inHelp := false
	for _, line := range strings.Split(out, "\n") {
		if h := pminfoHeader.FindStringSubmatch(line); h != nil {
			m = &pminfoMetric{pmid: h[2], oneline: h[3], instLabels: map[string]string{}}
			ms[h[1]] = m
			inHelp = false
			continue
		}
		if m == nil {
			continue
		}
		switch {
		case pminfoInst.MatchString(line):
			g := pminfoInst.FindStringSubmatch(line)
			m.instLabels[g[1]] = g[3]
			inHelp = false
		case inHelp:
			m.help = append(m.help, line)
		case strings.HasPrefix(line, "    Data Type: "):
			typ, indom, _ := strings.Cut(strings.TrimPrefix(line, "    Data Type: "), "  InDom: ")
			m.typ, m.indom = typ, strings.Fields(indom)[0]
		case strings.HasPrefix(line, "    Semantics: "):
			m.sem, m.units, _ = strings.Cut(strings.TrimPrefix(line, "    Semantics: "), "  Units: ")
		case strings.HasPrefix(line, "    labels "):
			m.labels = strings.TrimPrefix(line, "    labels ")
		case line == "Help:":
			inHelp = true
		}
	}
	return ms
}

var pminfoTypes = map[string]semantics.Type{"32-bit int": 0, "32-bit unsigned int": 1, "64-bit int": 2, "64-bit unsigned int": 3, "float": 4, "double": 5, "string": 6, "aggregate": 7, "event record array": 9, "highres event record array": 10}

// TestInfoPMCDMatchesPminfo compares info --pmcd with pminfo -dmTtl (PMID,
// one-line and long help, type, instance domain, semantics, units, merged
// labels of every metric and of every instance) for every metric the
// local pmcd serves.
func TestInfoPMCDMatchesPminfo(t *testing.T) {
	t.Parallel()
	s := localPMCD(t, "local:")
	var out bytes.Buffer
	if err := writeInfo(&out, s); err != nil {
		t.Fatal(err)
	}
	var got []struct {
		Name, PMID, Type, Sem, Units, OneLine, Help string
		InDom                                       *string
		Labels                                      json.RawMessage
		Instances                                   []struct {
			ID     int32
			Name   string
			Labels json.RawMessage
		}
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := parsePminfo(pminfo(t, "-dmTtl"))
	byDesc := map[string]semantics.Desc{}
	for _, m := range s.Metrics() {
		byDesc[m.Name] = m.Desc
	}
	seen := map[string]bool{}
	instChecked, instMissing, mmvChurn := 0, 0, 0
	for _, g := range got {
		seen[g.Name] = true
		w := want[g.Name]
		if w == nil {
			if strings.HasPrefix(g.Name, "mmv.") {
				mmvChurn++ // MMV files come and go (other processes write them)
				continue
			}
			t.Errorf("%s: not listed by pminfo", g.Name)
			continue
		}
		indom := "PM_INDOM_NULL"
		if g.InDom != nil {
			indom = *g.InDom
		}
		units := g.Units
		if units == "" {
			units = "none"
		}
		help := strings.TrimRight(strings.Join(w.help, "\n"), "\n")
		ours := g.Help // pminfo -T prints pmLookupText(PM_TEXT_HELP): the source must fall back to the one-line text itself
		if g.PMID != w.pmid || g.OneLine != w.oneline || byDesc[g.Name].Type != pminfoTypes[w.typ] || indom != w.indom || g.Sem != w.sem || units != byDesc[g.Name].Units.StringPCP6() && units != w.units {
			t.Errorf("%s: ours %s [%s] %s %s %s %q; pminfo %s [%s] %s %s %s %q", g.Name, g.PMID, g.OneLine, g.Type, indom, g.Sem, units, w.pmid, w.oneline, w.typ, w.indom, w.sem, w.units)
		}
		if strings.TrimRight(ours, "\n") != help {
			t.Errorf("%s: help %q, pminfo %q", g.Name, ours, help)
		}
		var compact bytes.Buffer
		json.Compact(&compact, g.Labels)
		if compact.String() != w.labels {
			t.Errorf("%s: labels %s, pminfo %s", g.Name, g.Labels, w.labels)
		}
		for _, in := range g.Instances {
			key := fmt.Sprintf("[%d or %q]", in.ID, in.Name)
			wl, ok := w.instLabels[key]
			if !ok {
				instMissing++ // an instance gone between our read and pminfo's (processes)
				continue
			}
			var metric, inst semantics.LabelSet
			metric, _ = semantics.ParseLabelsJSON(g.Labels, semantics.LabelItem)
			inst, _ = semantics.ParseLabelsJSON(in.Labels, semantics.LabelInstances)
			if gl := semantics.MergeLabels(metric, inst).String(); gl != wl {
				t.Errorf("%s %s: labels %s, pminfo %s", g.Name, key, gl, wl)
			}
			instChecked++
		}
	}
	for name := range want {
		switch {
		case seen[name] || strings.HasPrefix(name, "event."): // event.* are libpcp's own
		case strings.HasPrefix(name, "mmv."):
			mmvChurn++
		default:
			t.Errorf("%s: listed by pminfo, not by info --pmcd", name)
		}
	}
	if len(got) < 1000 || instChecked < 1000 {
		t.Errorf("only %d metrics, %d instances checked", len(got), instChecked)
	}
	t.Logf("%d metrics and %d instances agree with pminfo -dmTtl (%d instances gone meanwhile, %d MMV metrics came or went)", len(got), instChecked, instMissing, mmvChurn)
}

// pminfoValues parses pminfo -f: metric -> instance ("" singular, else the
// "[id or \"name\"]" text) -> value text.
func pminfoValues(out string) map[string]map[string]string {
	vals := map[string]map[string]string{}
	var cur map[string]string
	for _, line := range strings.Split(out, "\n") {
		switch {
		case line == "":
		case !strings.HasPrefix(line, " "):
			cur = map[string]string{}
			vals[line] = cur
		case strings.HasPrefix(line, "    value "):
			cur[""] = strings.TrimPrefix(line, "    value ")
		case pminfoInst.MatchString(line):
			g := pminfoInst.FindStringSubmatch(line)
			cur[g[1]] = g[3]
		}
	}
	return vals
}

// pminfoText formats a value as pminfo -f prints it.
func pminfoText(v semantics.Value) string {
	switch v.Type() {
	case semantics.TypeFloat:
		return strconv.FormatFloat(float64(v.Float32()), 'g', 8, 32)
	case semantics.TypeDouble:
		return strconv.FormatFloat(v.Float64(), 'g', 16, 64)
	case semantics.TypeString:
		return strconv.Quote(v.Str())
	case semantics.Type32, semantics.Type64:
		return strconv.FormatInt(v.Int64(), 10)
	case semantics.TypeU32, semantics.TypeU64:
		return strconv.FormatUint(v.Uint64(), 10)
	}
	return ""
}

// TestFetchPMCDMatchesPminfo fetches every metric of the local pmcd between
// two pminfo -f runs: a value pminfo printed the same both times must be
// ours too (hinv.*, kernel.uname.*, pmcd.version, ...), and a counter must
// lie between pminfo's two values.
func TestFetchPMCDMatchesPminfo(t *testing.T) {
	t.Parallel()
	s := localPMCD(t, "local:")
	ms := s.Metrics()
	names := make([]string, 0, len(ms))
	pmids := make([]semantics.PMID, 0, len(ms))
	for _, m := range ms {
		if m.Desc.PMID.Domain() == 3 { // per-process values: too many changing between runs
			continue
		}
		if strings.HasPrefix(m.Name, "mmv.") {
			continue // MMV files come and go (other tests write them): pminfo fails on a name gone
		}
		names = append(names, m.Name)
		pmids = append(pmids, m.Desc.PMID)
	}
	before := pminfoValues(pminfo(t, append([]string{"-f"}, names...)...))
	var res source.Result
	if err := s.Fetch(time.Now(), pmids, &res); err != nil {
		t.Fatal(err)
	}
	if err := pmcdFetchError(s); err != nil {
		t.Fatal(err)
	}
	after := pminfoValues(pminfo(t, append([]string{"-f"}, names...)...))
	insts := map[semantics.InDom]map[int32]string{}
	instName := func(in semantics.InDom, id int32) string {
		if in == semantics.InDomNull {
			return ""
		}
		m, ok := insts[in]
		if !ok {
			m = map[int32]string{}
			for _, i := range s.Instances(in) {
				m[i.ID] = i.Name
			}
			insts[in] = m
		}
		return fmt.Sprintf("[%d or %q]", id, m[id])
	}
	same, counters, changed, alone, fluct := 0, 0, 0, 0, 0
	byName := map[string]source.Metric{}
	for _, m := range ms {
		byName[m.Name] = m
	}
	for i, name := range names {
		m := byName[name]
		set := res.Sets[i]
		if set.Err != nil {
			continue
		}
		for _, iv := range set.Values {
			key := instName(m.Desc.InDom, iv.Inst)
			b, a := before[name][key], after[name][key]
			if b == "" || a == "" {
				continue
			}
			ours := pminfoText(iv.Value)
			switch {
			case a == b && ours == a:
				same++
			case a == b && m.Desc.Sem == semantics.SemDiscrete:
				// some PMDAs answer differently with other metrics in the
				// same fetch (the linux agent's network.interface.type is 0
				// for lo fetched with its whole subtree): pminfo -f fetched
				// this metric alone, so must we
				var one source.Result
				s.Fetch(time.Now(), []semantics.PMID{m.Desc.PMID}, &one)
				v := ""
				for _, x := range one.Sets[0].Values {
					if x.Inst == iv.Inst {
						v = pminfoText(x.Value)
					}
				}
				if v != a {
					t.Errorf("%s %s: %s (%s fetched alone), pminfo %s before and after", name, key, ours, v, a)
				}
				alone++
			case a == b:
				fluct++ // an instant value that changed and came back
			case m.Desc.Sem == semantics.SemCounter && m.Desc.Type.IsNumeric():
				lo, err1 := strconv.ParseFloat(b, 64)
				hi, err2 := strconv.ParseFloat(a, 64)
				v := iv.Value.Float64()
				if (err1 == nil && err2 == nil && hi < lo) || name == "mem.vmstat.workingset_nodes" {
					// went down (or may have, between the two pminfo
					// runs): not a counter in fact (the linux agent's
					// mem.vmstat.workingset_nodes is a current count)
					changed++
					continue
				}
				if err1 != nil || err2 != nil || v < lo || v > hi {
					t.Errorf("counter %s %s: %s, not between pminfo's %s and %s", name, key, ours, b, a)
				}
				counters++
			default:
				changed++
			}
		}
	}
	if same < 500 || counters < 50 {
		t.Errorf("only %d unchanged values and %d counters compared", same, counters)
	}
	t.Logf("%d unchanged values equal (%d of them fetched alone), %d changing counters bracketed, %d changing instant values not compared (%d changed and came back)", same+alone, alone, counters, changed+fluct, fluct)
}

// scrapeSeries reads a text exposition into "name{sorted labels}" -> true,
// with "TYPE name t" and "HELP name text" entries.
func scrapeSeries(t *testing.T, r io.Reader) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	labelRE := regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "# TYPE ") || strings.HasPrefix(line, "# HELP "):
			if f := strings.SplitN(line, " ", 4); len(f) == 4 && f[3] != "" {
				out[line[2:]] = true // an empty HELP is no HELP
			}
		case line == "" || strings.HasPrefix(line, "#"):
		default:
			name, rest, _ := strings.Cut(line, "{")
			labels := ""
			if rest != "" {
				labels = rest[:strings.LastIndex(rest, "}")]
			} else {
				name, _, _ = strings.Cut(line, " ")
			}
			ls := labelRE.FindAllString(labels, -1)
			sort.Strings(ls)
			out[name+"{"+strings.Join(ls, ",")+"}"] = true
		}
	}
	return out
}

// TestServePMCDMatchesPmproxy compares serve --pmcd --naming pmproxy with
// pmproxy's /metrics on the same pmcd: the same series (names and labels),
// TYPE and HELP lines, up to values and order. Both reach pmcd with the
// credentials of a TCP client (pmproxy's are not root's), so per-process
// metrics are refused to both alike.
func TestServePMCDMatchesPmproxy(t *testing.T) {
	t.Parallel()
	localPMCD(t, "127.0.0.1")
	base := os.Getenv("PCP_EXPORTER_PMPROXY_URL")
	if base == "" {
		base = "http://localhost:44322"
	}
	client := &http.Client{Timeout: 60 * time.Second}
	get := func(url string) map[string]bool {
		resp, err := client.Get(url)
		if err != nil {
			if e2e.Mandatory() {
				t.Fatal(err)
			}
			t.Skipf("pmproxy not answering: %v", err)
		}
		defer resp.Body.Close()
		return scrapeSeries(t, resp.Body)
	}
	addr := e2e.FreeAddr(t)
	// pmproxy serves every metric: so does serve with everything the lean
	// default leaves out turned on (pmproxy leaves strings out, secrets too)
	args := []string{"serve", "--web.listen-address=" + addr, "--pmcd=127.0.0.1", "--naming=pmproxy"}
	for _, w := range mapping.LeanNames() {
		args = append(args, "--mapping.with="+w)
	}
	startExporter(t, client, "http://"+addr, args...)
	var theirs, ours map[string]bool
	// a series can come or go between the two scrapes (a new network
	// interface, a process): compare again, up to three times
	for attempt := 0; attempt < 3; attempt++ {
		theirs = get(base + "/metrics")
		ours = get("http://" + addr + "/metrics")
		for k := range ours {
			name := strings.TrimPrefix(strings.TrimPrefix(k, "TYPE "), "HELP ")
			if strings.HasPrefix(name, "pcp_exporter_") || strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") || strings.HasPrefix(name, "promhttp_") {
				delete(ours, k)
			}
		}
		if diff(theirs, ours) == "" {
			break
		}
	}
	if d := diff(theirs, ours); d != "" {
		t.Errorf("serve --naming pmproxy differs from pmproxy's /metrics:\n%s", d)
	}
	if len(theirs) < 1000 {
		t.Errorf("only %d series and lines compared", len(theirs))
	}
	t.Logf("%d series, TYPE and HELP lines equal", len(theirs))
}

func diff(want, got map[string]bool) string {
	var b strings.Builder
	n := 0
	for k := range want {
		if !got[k] && n < 20 {
			fmt.Fprintf(&b, "only pmproxy: %s\n", k)
			n++
		}
	}
	for k := range got {
		if !want[k] && n < 40 {
			fmt.Fprintf(&b, "only ours: %s\n", k)
			n++
		}
	}
	return b.String()
}

// TestServeDefaultPMCDAndMMV: serve with no source flag, on a host where
// pmcd answers, serves pmcd and the MMV directory, without pmcd's mmv
// subtree (the MMV files are read directly: no value twice).
func TestServeDefaultPMCDAndMMV(t *testing.T) {
	t.Parallel()
	localPMCD(t, "local:")
	tmp := t.TempDir()
	os.MkdirAll(filepath.Join(tmp, "mmv"), 0o755)
	b, err := os.ReadFile(filepath.Join(corpus, "mmv", "files", "corpusv1"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(tmp, "mmv", "corpusv1"), b, 0o644)
	client := &http.Client{Timeout: 60 * time.Second}
	addr := e2e.FreeAddr(t)
	startExporterEnv(t, []string{"PCP_TMP_DIR=" + tmp}, client, "http://"+addr, "serve", "--web.listen-address="+addr, "--no-mmv.pid-check")
	text := scrapeUntil(t, "http://"+addr, `pcp_exporter_source_up{reason="",source="pmcd`)
	for _, want := range []string{"\nkernel_all_load{", "\nmmv_corpusv1_", `pcp_exporter_source_up{reason="",source="pmcd unix:`, `pcp_exporter_source_up{reason="",source="` + filepath.Join(tmp, "mmv") + `"} 1`} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(text, "\nmmv_control_") { // pmcd's mmv agent always has mmv.control.*

		t.Errorf("pmcd's mmv subtree is served too")
	}
}

// TestServePMCDRestart restarts a pmcd under a running serve --pmcd: the
// source goes down, with its reason, and comes back by itself, with one
// log line per change of state. The pmcd is a private one (pmcd, linux and
// mmv as DSOs) restarted on its own socket and port.
func TestServePMCDRestart(t *testing.T) {
	t.Parallel()
	p := e2e.StartPMCD(t, e2e.PMCDConfig{Agents: e2e.DSOAgents})
	client := &http.Client{Timeout: 30 * time.Second}
	addr := e2e.FreeAddr(t)
	spec := "unix:" + p.Socket
	out := startExporter(t, client, "http://"+addr, "serve", "--web.listen-address="+addr, "--pmcd="+spec)
	scrape := func() string {
		resp, err := client.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	up := `pcp_exporter_source_up{reason="",source="pmcd ` + spec + `"} 1`
	down := `pcp_exporter_source_up{reason="down",source="pmcd ` + spec + `"} 0`
	if text := scrape(); !strings.Contains(text, up) || !strings.Contains(text, "\nkernel_all_load{") {
		t.Fatalf("source not up before the restart:\n%s", text)
	}
	p.Restart()
	sawDown, back := false, false
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && !back {
		text := scrape()
		if strings.Contains(text, down) {
			sawDown = true
		}
		back = sawDown && strings.Contains(text, up) && strings.Contains(text, "\nkernel_all_load{")
		time.Sleep(200 * time.Millisecond)
	}
	if !sawDown || !back {
		t.Fatalf("after the restart: down seen %v, back %v\n%s", sawDown, back, out)
	}
	log := out.String()
	if n, m := strings.Count(log, "PCP source is down"), strings.Count(log, "PCP source is up"); n != 1 || m != 1 {
		t.Errorf("%d lines of the source down and %d of it up again for one restart:\n%s", n, m, log)
	}
	t.Logf("exporter's log:\n%s", log)
}

func TestPMCDArgs(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"serve --pmcd":                        "serve --pmcd=local:",
		"serve --pmcd --naming=pmproxy":       "serve --pmcd=local: --naming=pmproxy",
		"serve --pmcd host --pmcd=h2":         "serve --pmcd host --pmcd=h2",
		"fetch --pmcd local: kernel.all.load": "fetch --pmcd local: kernel.all.load",
		"fetch --pmcd kernel.all.load":        "fetch --pmcd=local: kernel.all.load",
		"fetch --pmcd hinv --format json":     "fetch --pmcd=local: hinv --format json",
		"fetch --pmcd localhost hinv":         "fetch --pmcd localhost hinv",
		"fetch --pmcd host:44321 hinv":        "fetch --pmcd host:44321 hinv",
		"fetch --pmcd unix:/run/s hinv":       "fetch --pmcd unix:/run/s hinv",
		"fetch --pmcd db-1 hinv":              "fetch --pmcd db-1 hinv",
		"info --pmcd kernel":                  "info --pmcd kernel",
	} {
		if got, _ := pmcdArgs(strings.Fields(in)); strings.Join(got, " ") != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

// TestFetchBarePMCDMetric: `fetch --pmcd kernel.all.load`, as a PCP user
// writes it, reads kernel.all.load from the local pmcd (the instances
// pminfo -f lists) instead of taking it for a host to look up; a host
// name in its place is refused with the form that names a host.
func TestFetchBarePMCDMetric(t *testing.T) {
	t.Parallel()
	e2e.RequirePMCD(t)
	// --pmcd.metrics: only that metric's metadata is read (all of pmcd's
	// takes a minute on a loaded machine)
	code, out := runMain(t, nil, "fetch", "--pmcd", "kernel.all.load", "--pmcd.metrics=kernel.all.load")
	if code != 0 {
		t.Fatalf("fetch --pmcd kernel.all.load: exit %d: %s", code, out)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		f := strings.Split(line, ",")
		if len(f) != 5 || f[1] != "kernel.all.load" {
			t.Fatalf("fetch line %q", line)
		}
		got = append(got, fmt.Sprintf("[%s or %q]", f[2], f[3]))
	}
	var want []string
	for inst := range pminfoValues(pminfo(t, "-f", "kernel.all.load"))["kernel.all.load"] {
		want = append(want, inst)
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, " ") != strings.Join(want, " ") || len(want) != 3 {
		t.Errorf("fetch --pmcd kernel.all.load: instances %v, pminfo -f %v", got, want)
	}
	code, out = runMain(t, nil, "fetch", "--pmcd", "pmcdhost", "kernel.all.load", "--pmcd.metrics=kernel.all.load")
	if code != 1 || !strings.Contains(out, "pmcdhost: Unknown metric name") || !strings.Contains(out, "--pmcd=pmcdhost") {
		t.Errorf("fetch --pmcd pmcdhost kernel.all.load: exit %d: %s", code, out)
	}
}

// TestOTLPPushFromPMCD pushes the local pmcd's kernel counters to a real
// OpenTelemetry Collector: monotonic cumulative sums whose start time is
// the host's boot (kernel.all.uptime), pmcd's hostname context label as
// the resource's host.name.
func TestOTLPPushFromPMCD(t *testing.T) {
	t.Parallel()
	grpcAddr, _, out := otelcol(t)
	sel, _ := pmcd.ParseSelection([]string{"kernel.all.cpu", "kernel.all.uptime"})
	s, err := pmcd.Open("local:", pmcd.Options{Selection: sel})
	if err != nil {
		if e2e.Mandatory() {
			t.Fatal(err)
		}
		t.Skipf("no local pmcd: %v", err)
	}
	defer s.Close()
	mapper, err := newMapper("", "default", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &bridge.OTLPConfig{Endpoint: grpcAddr, Protocol: "grpc", Interval: time.Hour, Timeout: 5 * time.Second, Insecure: true}
	stop, err := f.StartPush(context.Background(), slog.New(slog.DiscardHandler), nil, bridge.NewOTelProducer(mapper, nil, []bridge.Source{{Name: "pmcd", Src: s}}...))
	if err != nil {
		t.Fatal(err)
	}
	stop()
	up := pminfoValues(pminfo(t, "-f", "kernel.all.uptime"))["kernel.all.uptime"][""]
	uptime, err := strconv.ParseFloat(up, 64)
	if err != nil {
		t.Fatalf("pminfo kernel.all.uptime: %q", up)
	}
	boot := time.Now().Add(-time.Duration(uptime * float64(time.Second)))
	var user *otlpPoint
	deadline := time.Now().Add(20 * time.Second)
	for user == nil && time.Now().Before(deadline) {
		for _, p := range readOTLPFile(t, out) {
			if p.metric == "kernel.all.cpu.user" {
				user = &p
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if user == nil {
		t.Fatal("kernel.all.cpu.user not pushed")
	}
	if user.kind != "sum" || !user.monotonic || user.temporal != 2 || user.unit != "s" {
		t.Errorf("kernel.all.cpu.user: %+v, want a monotonic cumulative sum in s", *user)
	}
	if d := time.Duration(user.start - boot.UnixNano()); d < -5*time.Second || d > 5*time.Second {
		t.Errorf("start time %v, the host booted at %v", time.Unix(0, user.start), boot)
	}
	host, _ := s.Metrics()[0].Labels.Get("hostname")
	if host.Value == "" || `"`+user.resource["host.name"]+`"` != host.Value {
		t.Errorf("resource %v: host.name is not pmcd's hostname label %s", user.resource, host.Value)
	}
}

// TestDerivedOverPMCD: derived metrics are evaluated over a pmcd source as
// over any other (fetch --pmcd --derived.config).
func TestDerivedOverPMCD(t *testing.T) {
	t.Parallel()
	localPMCD(t, "local:")
	conf := filepath.Join(t.TempDir(), "derived.conf")
	os.WriteFile(conf, []byte("test.ncpu2 = hinv.ncpu * 2\n"), 0o644)
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "fetch", "--pmcd=local:", "--derived.config="+conf, "test.ncpu2")
	cmd.Env = append(os.Environ(), "PCP_EXPORTER_TEST_MAIN=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	n, _ := strconv.Atoi(pminfoValues(pminfo(t, "-f", "hinv.ncpu"))["hinv.ncpu"][""])
	if want := fmt.Sprintf(",test.ncpu2,,,%d\n", 2*n); n == 0 || !strings.HasSuffix(string(out), want) {
		t.Errorf("fetch said %q, want a row ending %q (pminfo hinv.ncpu %d)", out, want, n)
	}
}

// TestServePMCDLintsClean: a scrape of every metric the local pmcd serves,
// default naming, is clean for promtool's lint (issue 25: real host data,
// not only the corpus): names, suffixes, help, no abbreviated units.
func TestServePMCDLintsClean(t *testing.T) {
	t.Parallel()
	localPMCD(t, "local:")
	promtool := e2e.Require(t, "promtool")[0]
	client := &http.Client{Timeout: 60 * time.Second}
	addr := e2e.FreeAddr(t)
	startExporter(t, client, "http://"+addr, "serve", "--web.listen-address="+addr, "--pmcd=local:")
	body := []byte(scrapeUntil(t, "http://"+addr, `pcp_exporter_source_up{reason="",source="pmcd`, "\nkernel_all_load{"))
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("promtool check metrics on %d bytes of the local pmcd's metrics: %v\n%s", len(body), err, out)
	}
}

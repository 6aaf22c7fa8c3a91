package mmv

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

const corpusDir = "../../testdata/pcp-corpus/mmv"

// contextLabels are pmcd's context labels (host identity), which pmdammv
// does not provide and this package therefore does not report.
var contextLabels = map[string]bool{"domainname": true, "groupid": true, "hostname": true, "machineid": true, "userid": true}

// pminfoBlocks splits `pminfo -dfTtml` output into one block of lines per
// metric, keyed by metric name, dropping context labels.
func pminfoBlocks(t *testing.T, path string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string][]string{}
	for _, blk := range strings.Split(strings.TrimSpace(string(b)), "\n\n") {
		lines := strings.Split(blk, "\n")
		name, _, _ := strings.Cut(lines[0], " ")
		for i, l := range lines {
			if j := strings.Index(l, "labels {"); j >= 0 {
				lines[i] = l[:j] + "labels " + dropContext(t, l[j+len("labels "):])
			}
		}
		blocks[name] = lines
	}
	return blocks
}

// dropContext re-renders a pminfo label object without the context labels.
func dropContext(t *testing.T, obj string) string {
	dec := json.NewDecoder(strings.NewReader(obj))
	dec.UseNumber()
	var parts []string
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("labels %q: %v", obj, err)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatal(err)
		}
		if !contextLabels[k.(string)] {
			parts = append(parts, strconv.Quote(k.(string))+":"+string(raw))
		}
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// renderLabels prints a label set as pminfo -l does: sorted names, maps
// flattened into dotted names.
func renderLabels(t *testing.T, s semantics.LabelSet) string {
	type kv struct{ k, v string }
	var all []kv
	var flatten func(prefix string, raw json.RawMessage)
	flatten = func(prefix string, raw json.RawMessage) {
		if bytes.HasPrefix(raw, []byte("{")) {
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber()
			dec.Token()
			for dec.More() {
				k, _ := dec.Token()
				var sub json.RawMessage
				if err := dec.Decode(&sub); err != nil {
					t.Fatal(err)
				}
				flatten(prefix+"."+k.(string), sub)
			}
			return
		}
		all = append(all, kv{prefix, string(raw)})
	}
	for _, l := range s {
		flatten(l.Name, json.RawMessage(l.Value))
	}
	sort.Slice(all, func(i, j int) bool { return all[i].k < all[j].k })
	var b strings.Builder
	b.WriteString("{")
	for i, p := range all {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(strconv.Quote(p.k) + ":" + p.v)
	}
	b.WriteString("}")
	return b.String()
}

func mergeSets(a, b semantics.LabelSet) semantics.LabelSet {
	out := append(semantics.LabelSet(nil), a...)
	for _, l := range b {
		out = mergeLabel(out, l)
	}
	return out
}

var pminfoType = map[semantics.Type]string{
	semantics.Type32: "32-bit int", semantics.TypeU32: "32-bit unsigned int",
	semantics.Type64: "64-bit int", semantics.TypeU64: "64-bit unsigned int",
	semantics.TypeFloat: "float", semantics.TypeDouble: "double", semantics.TypeString: "string",
}

// pminfoValue formats a value as pmPrintValue does.
func pminfoValue(v semantics.Value) string {
	switch v.Type() {
	case semantics.Type32, semantics.Type64:
		return strconv.FormatInt(v.Int64(), 10)
	case semantics.TypeU32, semantics.TypeU64:
		return strconv.FormatUint(v.Uint64(), 10)
	case semantics.TypeFloat:
		return cfloat(float64(v.Float32()), 8)
	case semantics.TypeDouble:
		return cfloat(v.Float64(), 16)
	case semantics.TypeString:
		return `"` + string(v.Bytes()) + `"`
	}
	return "?"
}

func cfloat(f float64, prec int) string {
	if math.IsNaN(f) {
		return "nan"
	}
	return strconv.FormatFloat(f, 'g', prec, 64)
}

// renderPminfo renders one metric of src as `pminfo -dfTtml` prints it.
func renderPminfo(t *testing.T, src source.Source, m source.Metric, vals []source.InstValue) []string {
	d := m.Desc
	first := m.Name + " PMID: " + d.PMID.String()
	if m.OneLine != "" {
		first += " [" + m.OneLine + "]"
	} else {
		first += " One-line Help: Error: One-line or help text is not available"
	}
	indom := "PM_INDOM_NULL 0xffffffff"
	if d.InDom != semantics.InDomNull {
		indom = fmt.Sprintf("%s 0x%x", d.InDom, uint32(d.InDom))
	}
	units := d.Units.StringPCP6()
	if units == "" {
		units = "none"
	}
	out := []string{
		first,
		fmt.Sprintf("    Data Type: %s  InDom: %s", pminfoType[d.Type], indom),
		fmt.Sprintf("    Semantics: %s  Units: %s", d.Sem, units),
		"    labels " + renderLabels(t, m.Labels),
	}
	switch {
	case m.Help != "":
		out = append(out, "Help:")
		out = append(out, strings.Split(m.Help, "\n")...)
	case m.OneLine != "":
		out = append(out, "Help:", m.OneLine)
	default:
		out = append(out, "Full Help: Error: One-line or help text is not available")
	}
	if d.InDom == semantics.InDomNull {
		for _, v := range vals {
			out = append(out, "    value "+pminfoValue(v.Value))
		}
		return out
	}
	insts := src.Instances(d.InDom)
	name := map[int32]string{}
	for _, in := range insts {
		name[in.ID] = in.Name
	}
	for _, v := range vals {
		out = append(out, fmt.Sprintf("    inst [%d or %q] value %s", v.Inst, name[v.Inst], pminfoValue(v.Value)))
	}
	for _, in := range insts {
		out = append(out, fmt.Sprintf("    inst [%d or %q] labels %s", in.ID, in.Name, renderLabels(t, mergeSets(m.Labels, in.Labels))))
	}
	return out
}

// compareWithPminfo checks every metric src exports against pminfo's
// answer, and that src exports every mmv metric of the answer but the
// control metrics and those in skip.
func compareWithPminfo(t *testing.T, src source.Source, want map[string][]string, skip func(string) bool) {
	t.Helper()
	metrics := src.Metrics()
	pmids := make([]semantics.PMID, len(metrics))
	for i, m := range metrics {
		pmids[i] = m.Desc.PMID
	}
	var res source.Result
	if err := src.Fetch(time.Time{}, pmids, &res); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i, m := range metrics {
		seen[m.Name] = true
		exp, ok := want[m.Name]
		if !ok {
			t.Errorf("%s: exported, but pminfo does not know it", m.Name)
			continue
		}
		if res.Sets[i].Err != nil {
			t.Errorf("%s: fetch: %v", m.Name, res.Sets[i].Err)
		}
		got := renderPminfo(t, src, m, res.Sets[i].Values)
		if strings.HasSuffix(m.Name, "elapsed.running") {
			// The open interval grows with time: ours must be later.
			g, e := lastNumber(t, got), lastNumber(t, exp)
			if g <= e {
				t.Errorf("%s: running ELAPSED value %d, want more than pminfo's %d", m.Name, g, e)
			}
			got, exp = got[:len(got)-1], exp[:len(exp)-1]
		}
		if strings.Join(got, "\n") != strings.Join(exp, "\n") {
			t.Errorf("%s differs from pminfo:\n--- got\n%s\n--- want\n%s", m.Name, strings.Join(got, "\n"), strings.Join(exp, "\n"))
		}
	}
	for name := range want {
		if !seen[name] && !strings.HasPrefix(name, "mmv.control.") && !skip(name) {
			t.Errorf("%s: reported by pminfo, not exported", name)
		}
	}
}

func lastNumber(t *testing.T, lines []string) int64 {
	l := lines[len(lines)-1]
	n, err := strconv.ParseInt(l[strings.LastIndex(l, " ")+1:], 10, 64)
	if err != nil {
		t.Fatalf("%q: %v", l, err)
	}
	return n
}

// TestCorpusDir reads the corpus MMV files as a directory, as pmdammv read
// them, and compares every metric with `pminfo -dfTtml mmv`.
func TestCorpusDir(t *testing.T) {
	want := pminfoBlocks(t, filepath.Join(corpusDir, "expected/pminfo-dfTtml.txt"))
	d, err := OpenDir(filepath.Join(corpusDir, "files"), Options{PIDCheck: false})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	compareWithPminfo(t, d, want, func(string) bool { return false })
	for _, fs := range d.Files() {
		if !fs.Exported || len(fs.Problems) > 0 {
			t.Errorf("%s: exported=%v reason=%q problems=%q", fs.Name, fs.Exported, fs.Reason, fs.Problems)
		}
	}
}

// TestCorpusFiles opens each corpus file alone and compares it with its
// per-file pminfo answer.
func TestCorpusFiles(t *testing.T) {
	for _, tc := range []struct{ file, answer string }{
		{"corpusv1", "pminfo-dfTtml.mmv.corpusv1.txt"},
		{"corpusv2", "pminfo-dfTtml.mmv.corpus_noprefix.txt"},
		{"corpusv3", "pminfo-dfTtml.mmv.corpusv3.txt"},
		{"corpussentinel", "pminfo-dfTtml.mmv.corpussentinel.txt"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			want := pminfoBlocks(t, filepath.Join(corpusDir, "expected", tc.answer))
			f, err := OpenFile(filepath.Join(corpusDir, "files", tc.file), Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			compareWithPminfo(t, f, want, func(string) bool { return false })
		})
	}
}

// copyCorpus copies the corpus MMV files into a fresh directory, setting
// the PID of the PROCESS file corpusv3 to pid.
func copyCorpus(t *testing.T, pid int) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"corpusv1", "corpusv2", "corpusv3", "corpussentinel"} {
		b, err := os.ReadFile(filepath.Join(corpusDir, "files", name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "corpusv3" {
			ne.PutUint32(b[32:], uint32(pid))
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// deadPID returns the PID of a process that has exited.
func deadPID(t *testing.T) int {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("cannot run true:", err)
	}
	return cmd.Process.Pid
}

// TestCorpusProcessFlag checks the PROCESS flag: with the writer gone the
// v3 file disappears as in pminfo-dfTl.after-v3-writer-exit.txt, with it
// alive (or without the PID check) it is exported.
func TestCorpusProcessFlag(t *testing.T) {
	after := pminfoBlocks(t, filepath.Join(corpusDir, "expected/pminfo-dfTl.after-v3-writer-exit.txt"))
	var wantNames []string
	for name := range after {
		if !strings.HasPrefix(name, "mmv.control.") {
			wantNames = append(wantNames, name)
		}
	}
	sort.Strings(wantNames)
	names := func(src source.Source) []string {
		var out []string
		for _, m := range src.Metrics() {
			out = append(out, m.Name)
		}
		return out
	}
	dead := deadPID(t)
	d, err := OpenDir(copyCorpus(t, dead), Options{PIDCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got := names(d); strings.Join(got, " ") != strings.Join(wantNames, " ") {
		t.Errorf("writer gone: exported\n%v\nwant (pminfo after the writer exited)\n%v", got, wantNames)
	}
	var v3 FileStatus
	for _, s := range d.Files() {
		if s.Name == "corpusv3" {
			v3 = s
		}
	}
	if v3.Exported || !strings.Contains(v3.Reason, "not running") {
		t.Errorf("corpusv3 status %+v, want a skipped file whose writer is not running", v3)
	}
	if _, err := OpenFile(filepath.Join(d.Path(), "corpusv3"), Options{PIDCheck: true}); !errors.Is(err, ErrProcessGone) {
		t.Errorf("OpenFile of a file whose writer is gone: %v, want ErrProcessGone", err)
	}

	for _, opts := range []struct {
		pid   int
		check bool
	}{{os.Getpid(), true}, {dead, false}} {
		d, err := OpenDir(copyCorpus(t, opts.pid), Options{PIDCheck: opts.check})
		if err != nil {
			t.Fatal(err)
		}
		if got := len(names(d)); got != len(wantNames)+4 {
			t.Errorf("pid %d, check %v: %d metrics, want %d", opts.pid, opts.check, got, len(wantNames)+4)
		}
		d.Close()
	}
}

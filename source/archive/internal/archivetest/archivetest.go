// Package archivetest holds what the tests of source/archive and
// source/archive/pcplog share: copies of corpus archives (compressed,
// edited, jumbled), the timelines the sparse-reading tests replay, and the
// comparisons of an archive's metadata with pminfo's and pmdumplog's.
// Only tests import it.
package archivetest

import (
	"bytes"
	"encoding/binary"
	"encoding/csv"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// Corpus is the path of the repository's testdata/pcp-corpus.
func Corpus() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "testdata", "pcp-corpus")
}

// Metadata is what the checks ask of an open archive.
type Metadata interface {
	Path() string
	Metrics() []source.Metric
	MetricLabels(semantics.Desc) semantics.LabelSet
	Instances(semantics.InDom) []source.Instance
	InstancesAt(semantics.InDom, time.Time) []source.Instance
}

func be32(b []byte) uint32 { return binary.BigEndian.Uint32(b) }

func put32(b []byte, off int, v uint32) { binary.BigEndian.PutUint32(b[off:], v) }

type Compressor func(w io.Writer) (io.WriteCloser, error)

func CompressFile(t *testing.T, src, dst string, c Compressor) {
	in, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := c(f)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(in); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func CopyArchive(t *testing.T, base, dir string) string {
	t.Helper()
	matches, _ := filepath.Glob(base + ".*")
	for _, m := range matches {
		b, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(m)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, filepath.Base(base))
}

// ValueText formats like pmfetch_interp.py: integers exact, floats widened to
// double and printed by Python repr (compared numerically, see sameValue).
func ValueText(v semantics.Value) string {
	switch v.Type() {
	case semantics.TypeFloat:
		return strconv.FormatFloat(float64(v.Float32()), 'g', -1, 64)
	case semantics.TypeDouble:
		return strconv.FormatFloat(v.Float64(), 'g', -1, 64)
	case semantics.TypeString:
		return strings.ToValidUTF8(v.Str(), "\uFFFD")
	}
	return string(semantics.AppendJSON(nil, v))
}

func ReadCSV(t testing.TB, path string) [][]string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1
	rows, err := r.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return rows[1:]
}

// pminfoMetric is one metric of `pminfo -dmTtl` output.
type pminfoMetric struct {
	name, pmid, oneline, help, typ, indom, sem, units, labels string
	insts                                                     map[string]string // "[id or \"name\"]" -> labels
}

var (
	reHeader = regexp.MustCompile(`^(\S+) PMID: (\S+) (.*)$`)
	reType   = regexp.MustCompile(`^    Data Type: (.*)  InDom: (\S+) 0x[0-9a-f]+$`)
	reSem    = regexp.MustCompile(`^    Semantics: (\S+)  Units: (.*)$`)
	reInst   = regexp.MustCompile(`^    inst (\[.*\]) labels (\{.*\})$`)
)

func parsePminfo(t testing.TB, path string) []*pminfoMetric {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []*pminfoMetric
	var cur *pminfoMetric
	var help []string
	inHelp := false
	flush := func() {
		if cur != nil {
			cur.help = strings.TrimRight(strings.Join(help, "\n"), "\n")
		}
		help, inHelp = nil, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		// a header line; within help text only after a blank separator line
		if m := reHeader.FindStringSubmatch(line); m != nil && (!inHelp || len(help) > 0 && help[len(help)-1] == "") {
			flush()
			cur = &pminfoMetric{name: m[1], pmid: m[2], insts: map[string]string{}}
			if strings.HasPrefix(m[3], "[") && strings.HasSuffix(m[3], "]") {
				cur.oneline = m[3][1 : len(m[3])-1]
			}
			out = append(out, cur)
			continue
		}
		if cur == nil {
			continue
		}
		if m := reInst.FindStringSubmatch(line); m != nil {
			inHelp = false
			cur.insts[m[1]] = m[2]
			continue
		}
		if inHelp {
			help = append(help, line)
			continue
		}
		switch {
		case reType.MatchString(line):
			m := reType.FindStringSubmatch(line)
			cur.typ, cur.indom = m[1], m[2]
		case reSem.MatchString(line):
			m := reSem.FindStringSubmatch(line)
			cur.sem, cur.units = m[1], m[2]
		case strings.HasPrefix(line, "    labels "):
			cur.labels = strings.TrimPrefix(line, "    labels ")
		case line == "Help:":
			inHelp = true
		}
	}
	flush()
	return out
}

var pminfoType = map[semantics.Type]string{
	semantics.Type32: "32-bit int", semantics.TypeU32: "32-bit unsigned int",
	semantics.Type64: "64-bit int", semantics.TypeU64: "64-bit unsigned int",
	semantics.TypeFloat: "float", semantics.TypeDouble: "double", semantics.TypeString: "string",
	semantics.TypeAggregate: "aggregate", semantics.TypeEvent: "event",
}

// withoutCluster drops cluster labels: pminfo 6.0.3 leaves them out of the
// merged set of archive metrics (README of the Corpus(); pmdumplog -e has them).
func withoutCluster(s semantics.LabelSet) semantics.LabelSet {
	var out semantics.LabelSet
	for _, l := range s {
		if l.Flags&semantics.LabelCluster == 0 {
			out = append(out, l)
		}
	}
	return out
}

// CheckMetadata compares Metrics and Instances of a with the output of
// `pminfo -dmTtl` on it, in the file pminfoOut.
func CheckMetadata(t *testing.T, a Metadata, pminfoOut string) {
	t.Helper()
	byName := map[string]source.Metric{}
	for _, m := range a.Metrics() {
		byName[m.Name] = m
	}
	want := parsePminfo(t, pminfoOut)
	seen := 0
	for _, w := range want {
		m, ok := byName[w.name]
		if !ok {
			if strings.HasPrefix(w.pmid, "511.0.") { // event.* of the PMNS, not in the archive
				continue
			}
			t.Errorf("%s: missing", w.name)
			continue
		}
		seen++
		d := m.Desc
		indom := d.InDom.String()
		units := d.Units.StringPCP6()
		if units == "" {
			units = "none"
		}
		help := m.Help
		if help == "" {
			help = m.OneLine
		}
		got := pminfoMetric{name: m.Name, pmid: d.PMID.String(), oneline: m.OneLine, help: help,
			typ: pminfoType[d.Type], indom: indom, sem: d.Sem.String(), units: units,
			labels: withoutCluster(m.Labels).String()}
		if w.labels == "" {
			got.labels = ""
		}
		g, ww := got, *w
		g.insts, ww.insts = nil, nil
		if fmt.Sprint(g) != fmt.Sprint(ww) {
			t.Errorf("%s:\n got %+v\nwant %+v", w.name, g, ww)
		}
		if len(w.insts) > 0 {
			insts := a.Instances(d.InDom)
			for _, in := range insts {
				key := fmt.Sprintf("[%d or %q]", in.ID, in.Name)
				wl, ok := w.insts[key]
				if !ok {
					continue
				}
				gl := withoutCluster(semantics.MergeLabels(m.Labels, in.Labels)).String()
				if gl != wl {
					t.Errorf("%s %s: labels %s, want %s", w.name, key, gl, wl)
				}
				delete(w.insts, key)
			}
			for k := range w.insts {
				t.Errorf("%s: instance %s missing", w.name, k)
			}
		}
	}
	if seen != len(byName) {
		t.Errorf("%d metrics in the archive, pminfo shows %d", len(byName), seen)
	}
}

// CheckSharedLabels compares each metric's labels from Metrics with
// MetricLabels; it returns the number of metrics and of those with labels.
func CheckSharedLabels(t *testing.T, a Metadata) (n, labelled int) {
	t.Helper()
	for _, m := range a.Metrics() {
		want := a.MetricLabels(m.Desc)
		if m.Labels.String() != want.String() {
			t.Errorf("%s %s: labels %s, merged alone %s", a.Path(), m.Name, m.Labels, want)
		}
		if len(m.Labels) != cap(m.Labels) {
			t.Errorf("%s %s: a shared label set with room to append", a.Path(), m.Name)
		}
		if len(m.Labels) > 0 {
			labelled++
		}
		n++
	}
	return n, labelled
}

// CheckInDomsAgainstPmdumplog compares the instance domain in force at each
// indom record time of a (deltas applied) with out, the output of
// `pmdumplog -i`, and returns how many records it checked.
func CheckInDomsAgainstPmdumplog(t *testing.T, a Metadata, start time.Time, out []byte) int {
	t.Helper()
	var indom semantics.InDom
	var at time.Time
	var want []string
	checked := 0
	flush := func() {
		if at.IsZero() {
			return
		}
		var got []string
		for _, in := range a.InstancesAt(indom, at) {
			got = append(got, fmt.Sprintf("%d %s", in.ID, in.Name))
		}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("indom %s at %s:\n got %q\nwant %q", indom, at.Format(time.RFC3339Nano), got, want)
		}
		checked++
		at, want = time.Time{}, nil
	}
	for _, line := range strings.Split(string(out), "\n") {
		if m := reIndomHead.FindStringSubmatch(line); m != nil {
			flush()
			var d, s uint32
			fmt.Sscanf(m[1], "%d.%d", &d, &s)
			indom = semantics.NewInDom(d, s)
		} else if m := reIndomTime.FindStringSubmatch(line); m != nil {
			flush()
			at = TodTime(t, start, m[1])
		} else if m := reIndomInst.FindStringSubmatch(line); m != nil {
			want = append(want, m[1]+" "+m[2])
		}
	}
	flush()
	return checked
}

// JumbledLive is a copy of live.0 where a fraction of the records (not the
// first and last five) take the timestamp of a record up to five before or
// after them: times that repeat and go back and forth all through the file.
func JumbledLive[A any](t *testing.T, open func(string) (A, error), rng *rand.Rand, frac float64) A {
	t.Helper()
	return EditedLive(t, open, func(b []byte, recs []int) {
		orig := bytes.Clone(b)
		for k := 5; k < len(recs)-5; k++ {
			if rng.Float64() < frac {
				from := recs[k+rng.Intn(11)-5]
				copy(b[recs[k]+4:recs[k]+12], orig[from+4:from+12])
			}
		}
	})
}

// EditedLive copies the Corpus()'s live archive into a temporary directory,
// with its volume changed by edit (given the offsets of its records).
func EditedLive[A any](t *testing.T, open func(string) (A, error), edit func(vol []byte, recs []int)) A {
	t.Helper()
	meta, err := os.ReadFile(filepath.Join(Corpus(), "archives/live/live.meta"))
	if err != nil {
		t.Fatal(err)
	}
	vol, err := os.ReadFile(filepath.Join(Corpus(), "archives/live/live.0"))
	if err != nil {
		t.Fatal(err)
	}
	var recs []int
	for pos := int(be32(vol)); pos+16 <= len(vol); pos += int(be32(vol[pos:])) {
		recs = append(recs, pos)
	}
	if len(recs) < 100 {
		t.Fatalf("%d records", len(recs))
	}
	b := bytes.Clone(vol)
	edit(b, recs)
	index, err := os.ReadFile(filepath.Join(Corpus(), "archives/live/live.index"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, data := range map[string][]byte{"live.meta": meta, "live.0": b, "live.index": index} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a, err := open(filepath.Join(dir, "live"))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Timelines are the timelines TestReplaySparse replays: every archive
// of the Corpus() (volumes compressed or not, one or several, v2 and v3),
// the two archives of marks/parts as one timeline, and copies of live.0
// whose records take a neighbour's time (times repeat and go back).
func Timelines[A io.Closer](t *testing.T, open func(string) (A, error)) (names []string, sets, clean [][]A) {
	metas, err := filepath.Glob(filepath.Join(Corpus(), "archives/*/*.meta*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range metas {
		base := strings.TrimSuffix(m, filepath.Ext(m))
		if filepath.Ext(base) == ".meta" {
			base = strings.TrimSuffix(base, ".meta")
		}
		a, err := open(base)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		names = append(names, strings.TrimPrefix(base, Corpus()+"/"))
		sets = append(sets, []A{a})
	}
	var parts []A
	for _, p := range []string{"part_a", "part_b"} {
		a, err := open(filepath.Join(Corpus(), "archives/marks/parts", p))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		parts = append(parts, a)
	}
	names = append(names, "marks/parts (two archives)")
	sets = append(sets, parts)
	for seed := int64(1); seed <= 3; seed++ {
		rng := rand.New(rand.NewSource(seed))
		names = append(names, fmt.Sprintf("live jumbled (seed %d)", seed))
		sets = append(sets, []A{JumbledLive(t, open, rng, 0.2)})
	}
	if len(sets) < 25 {
		t.Fatalf("only %d timelines", len(sets))
	}
	clean = slices.Clone(sets)
	live, err := open(filepath.Join(Corpus(), "archives/live/live"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { live.Close() })
	// records whose framing is wrong end a run before them: the answers
	// and the error are those of reading every record (the fetch times
	// and metrics are chosen from the records of the intact archive)
	for _, c := range []struct {
		name string
		edit func(b []byte, recs []int, k int)
	}{
		{"trailer wrong", func(b []byte, recs []int, k int) { put32(b, recs[k+1]-4, be32(b[recs[k+1]-4:])+8) }},
		{"length wrong", func(b []byte, recs []int, k int) { put32(b, recs[k], be32(b[recs[k]:])-8) }},
		{"numpmid too large", func(b []byte, recs []int, k int) { put32(b, recs[k]+12, 1<<30) }},
		{"a mark", func(b []byte, recs []int, k int) { put32(b, recs[k]+12, 0) }},
	} {
		for _, k := range []int{60} {
			names = append(names, fmt.Sprintf("live, record %d: %s", k, c.name))
			sets = append(sets, []A{EditedLive(t, open, func(b []byte, recs []int) { c.edit(b, recs, k) })})
			clean = append(clean, []A{live})
		}
	}
	return names, sets, clean
}

// TodTime turns pmdumplog's time of day ("08:57:27.395791" with 6 or 9
// digits) into a time on the day of ref (the archive's start), UTC.
func TodTime(t testing.TB, ref time.Time, tod string) time.Time {
	tt, err := time.Parse("15:04:05.999999999", tod)
	if err != nil {
		t.Fatalf("time %q: %v", tod, err)
	}
	y, m, d := ref.UTC().Date()
	return time.Date(y, m, d, tt.Hour(), tt.Minute(), tt.Second(), tt.Nanosecond(), time.UTC)
}

var (
	reIndomHead = regexp.MustCompile(`^InDom: (\S+)$`)
	reIndomTime = regexp.MustCompile(`^(\d\d:\d\d:\d\d\.\d+) (\d+) instances$`)
	reIndomInst = regexp.MustCompile(`^   (\d+) or "(.*)"$`)
)

// M4Metrics returns the archive's metrics of the comparison with pmrep
// (bench/replay/metrics.txt, performance anchor M4; every metric when the
// archive has none of them) and all its metrics.
func M4Metrics(tb testing.TB, metrics []source.Metric) (m4, all []semantics.PMID) {
	list, err := os.ReadFile(filepath.Join(Corpus(), "..", "..", "bench", "replay", "metrics.txt"))
	if err != nil {
		tb.Fatal(err)
	}
	want := map[string]bool{}
	for _, n := range strings.Fields(string(list)) {
		want[n] = true
	}
	for _, m := range metrics {
		all = append(all, m.Desc.PMID)
		if want[m.Name] {
			m4 = append(m4, m.Desc.PMID)
		}
	}
	if len(m4) == 0 {
		m4 = all
	}
	return m4, all
}

// BenchArchive is the archive the decode benchmark reads: PCPX_BENCH_ARCHIVE
// (e.g. workload W2 recorded by bench/decode/run.sh), else the corpus's live
// recording.
func BenchArchive() string {
	if p := os.Getenv("PCPX_BENCH_ARCHIVE"); p != "" {
		return p
	}
	return filepath.Join(Corpus(), "archives/live/live")
}

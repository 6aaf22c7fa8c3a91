package pcplog

import (
	"bufio"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source/archive/internal/archivetest"
)

const corpus = "../../../testdata/pcp-corpus"

// manifestRows returns (archive, output) of manifest.tsv rows of tool whose
// arguments satisfy match. Paths are relative to the corpus root.
func manifestRows(t testing.TB, tool string, match func(args string) bool) [][2]string {
	t.Helper()
	f, err := os.Open(filepath.Join(corpus, "manifest.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][2]string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		c := strings.Split(sc.Text(), "\t")
		if len(c) >= 6 && c[1] == tool && match(c[2]) && c[4] == "-" {
			out = append(out, [2]string{c[0], c[3]})
		}
	}
	if len(out) == 0 {
		t.Fatalf("no %s rows in manifest.tsv", tool)
	}
	return out
}

// RecordRows returns the rows pmfetch_interp.py -U prints for an archive:
// sample,time,metric,inst,inst_name,type,value,status (without the header),
// rows of one record sorted by metric name then instance.
func recordRows(t testing.TB, a *Archive) [][]string {
	var rows [][]string
	r := a.Records()
	defer r.Close()
	typeWord := map[semantics.Type]string{0: "32", 1: "U32", 2: "64", 3: "U64", 4: "FLOAT", 5: "DOUBLE", 6: "STRING"}
	names := map[semantics.InDom]map[int32]string{}
	sample := 0
	for r.Next() {
		rec := r.Record()
		ts := fmt.Sprintf("%d.%09d", rec.Time.Unix(), rec.Time.Nanosecond())
		if rec.Mark {
			rows = append(rows, []string{strconv.Itoa(sample), ts, "", "", "", "", "", "<mark> (numpmid 0)"})
		}
		type row struct {
			name string
			inst int64
			cols []string
		}
		var rr []row
		for _, s := range rec.Sets {
			d, _ := a.Desc(s.PMID)
			name := a.Name(s.PMID)
			tw := typeWord[d.Type]
			if tw == "" {
				tw = strconv.Itoa(int(d.Type))
			}
			base := []string{strconv.Itoa(sample), ts, name}
			if s.Err != nil || len(s.Values) == 0 {
				st := "no values"
				if s.Err != nil {
					st = s.Err.Error()
				}
				rr = append(rr, row{name, 0, append(base, "", "", tw, "", st)})
				continue
			}
			for _, v := range s.Values {
				iname := ""
				if d.InDom != semantics.InDomNull {
					m := names[d.InDom]
					if m == nil {
						m = map[int32]string{}
						for _, in := range a.Instances(d.InDom) {
							m[in.ID] = in.Name
						}
						names[d.InDom] = m
					}
					iname = m[v.Inst]
				}
				rr = append(rr, row{name, int64(v.Inst), append(base, strconv.Itoa(int(v.Inst)), iname, tw, archivetest.ValueText(v.Value), "ok")})
			}
		}
		sort.SliceStable(rr, func(i, j int) bool {
			if rr[i].name != rr[j].name {
				return rr[i].name < rr[j].name
			}
			return rr[i].inst < rr[j].inst
		})
		for _, x := range rr {
			rows = append(rows, x.cols)
		}
		sample++
	}
	if err := r.Err(); err != nil {
		t.Fatalf("%s: %v", a.Path(), err)
	}
	return rows
}

func sameValue(typ, want, got string) bool {
	if typ != "FLOAT" && typ != "DOUBLE" || want == "" && got == "" {
		return want == got
	}
	w, err1 := strconv.ParseFloat(want, 64)
	g, err2 := strconv.ParseFloat(got, 64)
	if err1 != nil || err2 != nil {
		return false
	}
	if math.IsNaN(w) {
		return math.IsNaN(g)
	}
	return math.Float64bits(w) == math.Float64bits(g)
}

// TestRecordsMatchCorpus reads every archive of the corpus and compares every
// record with the records.csv answer of libpcp (pmFetchHighResArchive).
func TestRecordsMatchCorpus(t *testing.T) {
	rows := manifestRows(t, "pmfetch_interp", func(a string) bool { return strings.HasPrefix(a, "-U ") })
	for _, mr := range rows {
		t.Run(mr[0], func(t *testing.T) {
			a, err := Open(filepath.Join(corpus, mr[0]))
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			want := archivetest.ReadCSV(t, filepath.Join(corpus, mr[1]))
			got := recordRows(t, a)
			if len(got) != len(want) {
				t.Errorf("%d rows, want %d", len(got), len(want))
			}
			bad := 0
			for i := 0; i < len(got) && i < len(want); i++ {
				w, g := want[i], got[i]
				ok := len(w) == 8 && w[0] == g[0] && w[1] == g[1] && w[2] == g[2] && w[3] == g[3] &&
					w[4] == g[4] && w[5] == g[5] && w[7] == g[7] && sameValue(w[5], w[6], g[6])
				if !ok {
					t.Errorf("row %d:\n got %q\nwant %q", i+1, g, w)
					if bad++; bad > 5 {
						t.FailNow()
					}
				}
			}
		})
	}
}

// TestMetadataMatchesPminfo compares Metrics and Instances of every corpus
// archive with `pminfo -dmTtl`.
func TestMetadataMatchesPminfo(t *testing.T) {
	rows := manifestRows(t, "pminfo", func(a string) bool { return strings.HasSuffix(a, " -dmTtl") })
	for _, mr := range rows {
		t.Run(mr[0], func(t *testing.T) {
			a, err := Open(filepath.Join(corpus, mr[0]))
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			archivetest.CheckMetadata(t, a, filepath.Join(corpus, mr[1]))
		})
	}
}

// TestMetricLabelsShared: Metrics merges the levels above the item once per
// (indom, cluster) and shares them between metrics; every metric
// of every corpus archive must still get what merging its five levels
// alone gives (MetricLabels). TestReplayMatchesLibpcp checks the same on a
// pmlogger recording, whose metrics come from several domains, clusters
// and indoms with labels of their own.
func TestMetricLabelsShared(t *testing.T) {
	n, labelled := 0, 0
	err := filepath.WalkDir(filepath.Join(corpus, "archives"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || !strings.HasSuffix(p, ".meta") {
			return err
		}
		a, err := Open(strings.TrimSuffix(p, ".meta"))
		if err != nil {
			return nil // the corpus's broken archives
		}
		k, l := archivetest.CheckSharedLabels(t, a)
		n, labelled = n+k, labelled+l
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if labelled == 0 {
		t.Fatal("no metric with labels")
	}
	t.Logf("%d metrics, %d with labels", n, labelled)
}

// TestMetricLabelsLevels: metrics that share a domain but not a cluster,
// an indom, or item labels get their own labels (neither the corpus nor a
// pmlogger recording of the linux PMDA has cluster labels).
func TestMetricLabelsLevels(t *testing.T) {
	m := newMeta()
	lab := func(typ semantics.LabelType, ident uint32, name, value string) {
		m.labels[labelKey{typ, ident}] = []labelRec{{sets: []instLabels{{labels: semantics.LabelSet{{Name: name, Value: value, Flags: typ}}}}}}
	}
	indom := semantics.InDom(29<<22 | 1)
	metrics := []struct {
		name    string
		cluster uint32
		indom   semantics.InDom
		want    string
	}{
		{"a.c0.x", 0, semantics.InDomNull, `{"agent":"d29","c":"zero","hostname":"h"}`},
		{"a.c0.y", 0, semantics.InDomNull, `{"agent":"d29","c":"zero","hostname":"h","item":"y"}`},
		{"a.c0.z", 0, indom, `{"agent":"d29","c":"zero","hostname":"h","i":"one"}`},
		{"a.c1.x", 1, semantics.InDomNull, `{"agent":"d29","c":"one","hostname":"h"}`},
		{"a.c1.z", 1, indom, `{"agent":"d29","c":"one","hostname":"h","i":"one"}`},
		{"a.c2.x", 2, semantics.InDomNull, `{"agent":"d29","hostname":"h"}`},
	}
	lab(semantics.LabelContext, uint32(semantics.InDomNull), "hostname", `"h"`)
	lab(semantics.LabelDomain, 29, "agent", `"d29"`)
	lab(semantics.LabelCluster, uint32(semantics.NewPMID(29, 0, 0)), "c", `"zero"`)
	lab(semantics.LabelCluster, uint32(semantics.NewPMID(29, 1, 0)), "c", `"one"`)
	lab(semantics.LabelInDom, uint32(indom), "i", `"one"`)
	for i, mt := range metrics {
		p := semantics.NewPMID(29, mt.cluster, uint32(i))
		m.descs[p] = &metricInfo{desc: semantics.Desc{PMID: p, InDom: mt.indom, Type: semantics.TypeU32}, names: []string{mt.name}}
		m.names[mt.name] = p
		if mt.name == "a.c0.y" {
			lab(semantics.LabelItem, uint32(p), "item", `"y"`)
		}
	}
	a := &Archive{}
	a.st.Store(&state{meta: m})
	got := map[string]string{}
	for _, mt := range a.Metrics() {
		got[mt.Name] = mt.Labels.String()
		if alone := a.MetricLabels(mt.Desc).String(); got[mt.Name] != alone {
			t.Errorf("%s: %s, merged alone %s", mt.Name, got[mt.Name], alone)
		}
	}
	for _, mt := range metrics {
		if got[mt.name] != mt.want {
			t.Errorf("%s: labels %s, want %s", mt.name, got[mt.name], mt.want)
		}
	}
}

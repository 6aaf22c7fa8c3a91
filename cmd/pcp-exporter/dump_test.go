package main

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

const corpus = "../../testdata/pcp-corpus"

// corpusRows returns (archive, answer) pairs of manifest.tsv for a tool.
func corpusRows(t *testing.T, tool string, match func(string) bool) [][2]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(corpus, "manifest.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	var out [][2]string
	for _, line := range strings.Split(string(b), "\n") {
		c := strings.Split(line, "\t")
		if len(c) >= 6 && c[1] == tool && match(c[2]) && c[4] == "-" {
			out = append(out, [2]string{c[0], c[3]})
		}
	}
	if len(out) == 0 {
		t.Fatalf("no %s rows", tool)
	}
	return out
}

type dumpLine struct {
	Time    string `json:"time"`
	Mark    *bool  `json:"mark"`
	Metrics []struct {
		PMID   string  `json:"pmid"`
		Name   string  `json:"name"`
		Error  *string `json:"error"`
		Values []struct {
			Inst  *int64          `json:"inst"`
			Value json.RawMessage `json:"value"`
		} `json:"values"`
	} `json:"metrics"`
}

// sameDumpValue compares a dump value (JSON) with a records.csv cell of type typ.
func sameDumpValue(typ, want string, got json.RawMessage) bool {
	switch typ {
	case "STRING":
		var s string
		return json.Unmarshal(got, &s) == nil && s == want
	case "FLOAT", "DOUBLE":
		var s string
		if json.Unmarshal(got, &s) == nil {
			return map[string]string{"NaN": "nan", "+Inf": "inf", "-Inf": "-inf"}[s] == want
		}
		bits := 64
		if typ == "FLOAT" {
			bits = 32
		}
		g, err := strconv.ParseFloat(string(got), bits)
		w, err2 := strconv.ParseFloat(want, 64)
		if err != nil || err2 != nil {
			return false
		}
		if bits == 32 {
			g = float64(float32(g))
		}
		return math.Float64bits(g) == math.Float64bits(w)
	}
	return string(got) == want // integers: exact digits
}

// TestDumpMatchesCorpus checks that dump prints every record of every corpus
// archive as libpcp returns it (records.csv: pmFetchHighResArchive).
func TestDumpMatchesCorpus(t *testing.T) {
	t.Parallel()
	for _, mr := range corpusRows(t, "pmfetch_interp", func(a string) bool { return strings.HasPrefix(a, "-U ") }) {
		t.Run(mr[0], func(t *testing.T) {
			var out bytes.Buffer
			if err := dumpArchive(&out, filepath.Join(corpus, mr[0])); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(filepath.Join(corpus, mr[1]))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			want, err := csv.NewReader(f).ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			want = want[1:]
			type row struct {
				time, name, inst, status string
				value                    json.RawMessage
			}
			var got []row
			sc := bufio.NewScanner(&out)
			sc.Buffer(nil, 64<<20)
			for sc.Scan() {
				var l dumpLine
				dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
				dec.UseNumber()
				dec.DisallowUnknownFields()
				if err := dec.Decode(&l); err != nil {
					t.Fatalf("%s: %v", sc.Text(), err)
				}
				tm, err := time.Parse(time.RFC3339Nano, l.Time)
				if err != nil || l.Mark == nil || l.Metrics == nil || !strings.HasSuffix(l.Time, "Z") {
					t.Fatalf("bad line %s", sc.Text())
				}
				ts := fmt.Sprintf("%d.%09d", tm.Unix(), tm.Nanosecond())
				if *l.Mark {
					got = append(got, row{time: ts, status: "<mark> (numpmid 0)"})
				}
				var rr []row
				var insts []int64
				for _, m := range l.Metrics {
					if m.Error != nil || len(m.Values) == 0 {
						st := "no values"
						if m.Error != nil {
							st = *m.Error
						}
						rr = append(rr, row{time: ts, name: m.Name, status: st})
						insts = append(insts, 0)
						continue
					}
					for _, v := range m.Values {
						in := "-1"
						var id int64 = -1
						if v.Inst != nil {
							id = *v.Inst
							in = strconv.FormatInt(id, 10)
						}
						rr = append(rr, row{time: ts, name: m.Name, inst: in, status: "ok", value: v.Value})
						insts = append(insts, id)
					}
				}
				idx := make([]int, len(rr))
				for i := range idx {
					idx[i] = i
				}
				sort.SliceStable(idx, func(a, b int) bool {
					if rr[idx[a]].name != rr[idx[b]].name {
						return rr[idx[a]].name < rr[idx[b]].name
					}
					return insts[idx[a]] < insts[idx[b]]
				})
				for _, i := range idx {
					got = append(got, rr[i])
				}
			}
			if len(got) != len(want) {
				t.Errorf("%d rows, want %d", len(got), len(want))
			}
			bad := 0
			for i := 0; i < len(got) && i < len(want); i++ {
				w, g := want[i], got[i]
				ok := g.time == w[1] && g.name == w[2] && g.inst == w[3] && g.status == w[7]
				if ok && g.status == "ok" {
					ok = sameDumpValue(w[5], w[6], g.value)
				}
				if !ok {
					t.Errorf("row %d: got %+v (value %s), want %q", i+1, g, g.value, w)
					if bad++; bad > 5 {
						t.FailNow()
					}
				}
			}
		})
	}
}

// TestDumpWritesAllBeforeAnError: archive-20150417.131733 of PCP's QA has 50
// good records before a zero-filled tail (pmdumplog archive-20150417.131733
// in testdata/pcp-qa prints 50 records, then "pmFetch: Corrupted record in
// a PCP archive log"): dump writes the 50 lines, whole, then the error
// naming the file and offset.
func TestDumpWritesAllBeforeAnError(t *testing.T) {
	var out bytes.Buffer
	err := dumpArchive(&out, filepath.Join("..", "..", "testdata", "pcp-qa", "archive-20150417.131733"))
	if err == nil || !strings.Contains(err.Error(), "archive-20150417.131733.0.xz: offset 432512:") {
		t.Errorf("error %v, want one at offset 432512", err)
	}
	if !bytes.HasSuffix(out.Bytes(), []byte("\n")) {
		t.Error("output does not end on a whole line")
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 50 {
		t.Fatalf("%d lines, want 50", len(lines))
	}
	for i, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Fatalf("line %d is not JSON: %.80q", i+1, l)
		}
	}
}

// TestDumpReportsCutRecord: a finished archive whose last record is cut
// (19970807.09.54 of PCP's QA cut at 1700 bytes): every record before it,
// then the error (pmdumplog prints the records to 23:55:01.171706, then
// "pmFetch: Corrupted record in a PCP archive log").
func TestDumpReportsCutRecord(t *testing.T) {
	dir := t.TempDir()
	for _, ext := range []string{".meta", ".index", ".0"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "pcp-qa", "19970807.09.54"+ext))
		if err != nil {
			t.Fatal(err)
		}
		if ext == ".0" {
			b = b[:1700]
		}
		if err := os.WriteFile(filepath.Join(dir, "a"+ext), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	err := dumpArchive(&out, filepath.Join(dir, "a"))
	if err == nil || !strings.Contains(err.Error(), "a.0: offset 1696: data record cut short") {
		t.Errorf("error %v, want the cut record at offset 1696", err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, `{"time":"1997-08-06T23:55:01.171706000Z"`) {
		t.Errorf("last line %.60q, want the record of 23:55:01.171706", last)
	}
}

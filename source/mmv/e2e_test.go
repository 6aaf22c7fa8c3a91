package mmv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
	"github.com/pcp-exporter/pcp-exporter/source/mmv/mmvwrite"
)

// fillValues sets a deterministic value in every slot of a writer.
func fillValues(t testing.TB, w *mmvwrite.Writer, cfg mmvwrite.Config, seed int) {
	t.Helper()
	for i, m := range cfg.Metrics {
		insts := []string{""}
		if !singular(m.InDom) {
			insts = nil
			for _, in := range cfg.InDoms {
				if in.Serial == m.InDom {
					for _, x := range in.Instances {
						insts = append(insts, x.Name)
					}
					break
				}
			}
		}
		for j, inst := range insts {
			h, err := w.Handle(m.Name, inst)
			if err != nil {
				t.Fatal(err)
			}
			n := int64(seed*1000 + i*10 + j)
			switch m.Type {
			case TypeI32, TypeI64:
				h.SetInt64(-n * 7919)
			case TypeU32:
				h.SetUint64(uint64(n) + 4000000000)
			case TypeU64:
				h.SetUint64(1<<63 + uint64(n))
			case TypeFloat, TypeDouble:
				h.SetFloat(float64(n) + 0.125)
			case TypeString:
				if err := h.SetString(fmt.Sprintf("value %d of %s, \"quoted\" é", n, inst)); err != nil {
					t.Fatal(err)
				}
			case TypeElapsed:
				if strings.HasSuffix(m.Name, "running") {
					h.IntervalStart()
				} else {
					h.SetInt64(n * 1000)
				}
			}
		}
	}
}

// TestPmdammvReadsWriter writes v1, v2 and v3 files (and a SENTINEL file)
// with Writer into the MMV directory of the running pmcd and compares what
// pminfo -dfTtml reports for them, through pmdammv, with what this package
// reads from the same files.
func TestPmdammvReadsWriter(t *testing.T) {
	// pmcd itself is not on PATH (Debian puts it in /usr/libexec/pcp/bin);
	// it is reached through pminfo.
	bins := e2e.Require(t, "pminfo", "pmstore")
	pminfo, pmstore := bins[0], bins[1]
	e2e.LockPMCD(t, false) // reads the system pmcd
	dir := DefaultDir()
	if err := exec.Command(pminfo, "-f", "mmv.control.files").Run(); err != nil {
		if e2e.Mandatory() {
			t.Fatalf("pmcd with pmdammv not reachable: %v", err)
		}
		t.Skipf("pmcd with pmdammv not reachable: %v", err)
	}
	if f, err := os.CreateTemp(dir, ".pcp-exporter-probe"); err != nil {
		if e2e.Mandatory() {
			t.Fatalf("cannot write to pmcd's MMV directory: %v", err)
		}
		t.Skipf("cannot write to pmcd's MMV directory: %v", err)
	} else {
		f.Close()
		os.Remove(f.Name())
	}
	tag := fmt.Sprintf("%d", os.Getpid()%100000)
	cases := []struct {
		corpus  string
		file    string
		cluster uint32
		version int
	}{
		{"corpusv1", "pcpexpv1_" + tag, 3901, 1},
		{"corpusv2", "pcpexpv2_" + tag, 3902, 2},
		{"corpusv3", "pcpexpv3_" + tag, 3903, 3},
		{"corpussentinel", "pcpexpsent_" + tag, 3904, 1},
	}
	for _, tc := range cases {
		cfg := corpusConfigs[tc.corpus]
		cfg.Cluster = tc.cluster
		if tc.corpus == "corpusv2" {
			// NOPREFIX names must not clash with anything else in pmcd.
			cfg.Metrics = append([]mmvwrite.MetricDef(nil), cfg.Metrics...)
			for i := range cfg.Metrics {
				cfg.Metrics[i].Name = strings.Replace(cfg.Metrics[i].Name, "corpus_noprefix", tc.file, 1)
			}
		}
		path := filepath.Join(dir, tc.file)
		w, err := mmvwrite.New(tc.file, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close(); os.Remove(path) })
		if w.Path() != path || w.Version() != tc.version {
			t.Fatalf("%s: path %s version %d, want %s version %d", tc.file, w.Path(), w.Version(), path, tc.version)
		}
		fillValues(t, w, cfg, int(tc.cluster))
		if tc.corpus == "corpussentinel" {
			for _, m := range cfg.Metrics {
				w.MustHandle(m.Name, "sentinel").SetSentinel()
			}
		}
	}
	// pmdammv notices a new file by the directory's mtime in seconds; ask
	// it to reload instead of waiting for the next second.
	if out, err := exec.Command(pmstore, "mmv.control.reload", "1").CombinedOutput(); err != nil {
		t.Logf("pmstore mmv.control.reload: %v: %s", err, out)
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			prefix := "mmv." + tc.file
			var out []byte
			var err error
			for try := 0; try < 30; try++ {
				out, err = exec.Command(pminfo, "-dfTtml", prefix).CombinedOutput()
				if err == nil && strings.Contains(string(out), "PMID") {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				t.Fatalf("pminfo -dfTtml %s: %v\n%s", prefix, err, out)
			}
			tmp := filepath.Join(t.TempDir(), "pminfo.txt")
			os.WriteFile(tmp, out, 0o644)
			want := pminfoBlocks(t, tmp)
			f, err := OpenFile(filepath.Join(dir, tc.file), Options{PIDCheck: true})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if len(want) != len(corpusConfigs[tc.corpus].Metrics) {
				t.Errorf("pminfo reports %d metrics, %d written:\n%s", len(want), len(corpusConfigs[tc.corpus].Metrics), out)
			}
			compareWithPminfo(t, f, want, func(string) bool { return false })
		})
	}
}

package pmcd

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
)

var update = flag.Bool("update", false, "capture testdata/*.pdu again from the local pmcd, and record FuzzHandshake's corpus (TestRecordHandshakeSeeds)")

// captured are the replies of the local pmcd (PCP 6.0.3) kept in testdata
// for the decoders' tests, fuzzing and benchmarks: name -> request.
var captured = []string{"traverse", "result", "instance", "labels", "text"}

// TestCapture records real pmcd replies into testdata with -update: a
// traversal of the namespace, a HIGHRES_RESULT of every metric but the
// per-process ones, an INSTANCE and a LABEL (INSTANCES) of the per-cpu
// domain, a one-line help TEXT.
func TestCapture(t *testing.T) {
	if !*update {
		t.Skip("capturing needs -update")
	}
	s, err := Open("local:", Options{Selection: Selection{Exclude: []string{"proc", "hotproc", "acct", "mmv", "cgroup"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := s.c
	var pmids []uint32
	for _, m := range s.Metrics() {
		pmids = append(pmids, uint32(m.Desc.PMID))
	}
	reqs := map[string]func(){
		"traverse": func() { c.w.Begin(pduPMNSTraverse); c.w.U32(0); c.w.U32(0) },
		"result": func() {
			c.w.Begin(pduHighresFetch)
			c.w.U32(0)
			c.w.U32(0)
			c.w.U32(0)
			c.w.U32(uint32(len(pmids)))
			for _, id := range pmids {
				c.w.U32(id)
			}
		},
		"instance": func() {
			c.w.Begin(pduInstanceReq)
			for _, w := range []uint32{uint32(semantics.NewInDom(60, 0)), 0, 0, 0xffffffff, 0} {
				c.w.U32(w)
			}
		},
		"labels": func() { c.w.Begin(pduLabelReq); c.w.U32(uint32(semantics.NewInDom(60, 0))); c.w.U32(labelInstances) },
		"text": func() {
			c.w.Begin(pduTextReq)
			c.w.U32(uint32(semantics.NewPMID(60, 2, 0)))
			c.w.U32(textOneLine | textPMID)
		},
	}
	for _, name := range captured {
		c.w.B = c.w.B[:0]
		reqs[name]()
		c.w.Finish()
		err := c.exchange(time.Now().Add(10*time.Second), 1, func(_ int, p pdu) error {
			if p.typ == pduError {
				return c.expect(p, 0)
			}
			return os.WriteFile(filepath.Join("testdata", name+".pdu"), p.b, 0o644)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// readCaptured returns a captured reply.
func readCaptured(t testing.TB, name string) pdu {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".pdu"))
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := readPDU(strings.NewReader(string(b)), nil, DefaultMaxPDU, "testdata")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func readCapturedBytes(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join("testdata", name+".pdu"))
}

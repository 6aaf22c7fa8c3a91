package pmcd

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// TestCapturedReplies decodes replies captured from the local pmcd; the
// expected answers are pminfo's (pminfo -t kernel.all.load, pminfo -f and
// -l hinv.cpu.clock on the same host).
func TestCapturedReplies(t *testing.T) {
	text := readCaptured(t, "text")
	d := decoder(text)
	d.U32()
	got := string(d.Bytes(d.Count(1, "buflen")))
	d.Pad()
	if got != "1, 5 and 15 minute load average" || d.End() != nil {
		t.Errorf("TEXT: %q %v", got, d.Err())
	}
	if got, err := decodeText(text, "testdata"); got != "1, 5 and 15 minute load average" || err != nil {
		t.Errorf("TEXT: %q %v", got, err)
	}
	insts, _, err := decodeInstances(readCaptured(t, "instance"), "testdata", 0)
	if err != nil || len(insts) != 2 || insts[0].Name != "cpu0" || insts[1].ID != 1 || insts[1].Name != "cpu1" {
		t.Errorf("INSTANCE: %+v %v", insts, err)
	}
	sets, err := decodeLabels(readCaptured(t, "labels"), "testdata", 0)
	if err != nil || len(sets) != 2 || sets[1].inst != 1 || sets[1].labels.String() != `{"cpu":1}` || sets[1].labels[0].Flags != semantics.LabelInstances {
		t.Errorf("LABEL: %+v %v", sets, err)
	}
	names, _, err := decodeNames(readCaptured(t, "traverse"), "testdata")
	if err != nil || len(names) < 2000 || !contains(names, "kernel.all.load") || !contains(names, "hinv.ncpu") {
		t.Errorf("PMNS_NAMES: %d names, %v", len(names), err)
	}
	res := readCaptured(t, "result")
	pmids, types := resultPMIDs(res)
	var rd resultDecoder
	out, ts, err := rd.decode(res, pmids, types, nil)
	if err != nil || len(out) != len(pmids) || ts.Year() < 2020 {
		t.Fatalf("HIGHRES_RESULT: %d sets at %v: %v", len(out), ts, err)
	}
	rd.link(out)
	n := 0
	for _, s := range out {
		n += len(s.Values)
		if s.PMID == semantics.NewPMID(60, 0, 32) && (len(s.Values) != 1 || s.Values[0].Value.Uint64() != 2) {
			t.Errorf("hinv.ncpu: %+v, pminfo says 2", s.Values)
		}
	}
	if n < 1000 {
		t.Errorf("%d values", n)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// resultPMIDs reads the PMIDs of a HIGHRES_RESULT's value sets (as the
// request listed them), with type U32 for INSITU values.
func resultPMIDs(p pdu) ([]semantics.PMID, []semantics.Type) {
	b := p.b
	if len(b) < 32 {
		return nil, nil
	}
	np := int(binary.BigEndian.Uint32(b[12:]))
	var pmids []semantics.PMID
	var types []semantics.Type
	pos := 32
	for i := 0; i < np && pos+8 <= len(b) && i < 1<<16; i++ {
		pmids = append(pmids, semantics.PMID(binary.BigEndian.Uint32(b[pos:])))
		types = append(types, semantics.TypeU32)
		nv := int(int32(binary.BigEndian.Uint32(b[pos+4:])))
		pos += 8
		if nv > 0 {
			pos += 4 + 8*nv
		}
	}
	return pmids, types
}

// decodeAny decodes one PDU of any reply type as the client would.
func decodeAny(p pdu) {
	switch p.typ {
	case pduPMNSNames:
		decodeNames(p, "fuzz")
	case pduInstance:
		decodeInstances(p, "fuzz", 0)
	case pduLabel:
		decodeLabels(p, "fuzz", 0)
	case pduError:
		errorCode(p, "fuzz")
	case pduHighresResult, pduResult:
		pmids, types := resultPMIDs(p)
		var rd resultDecoder
		sets, _, err := rd.decode(p, pmids, types, nil)
		if err == nil {
			rd.link(sets)
			for _, s := range sets {
				for _, v := range s.Values {
					v.Value.Float64()
					v.Value.Bytes()
				}
			}
		}
	case pduText:
		decodeText(p, "fuzz")
	default:
		d := decoder(p)
		d.U32()
		d.Bytes(d.Count(1, "buflen"))
		d.Pad()
		d.End()
	}
}

// FuzzPDU feeds arbitrary bytes to the PDU reader and every reply decoder:
// an error is fine, a panic or an allocation beyond the input's size is not.
func FuzzPDU(f *testing.F) {
	for _, name := range captured {
		b, err := readCapturedBytes(name)
		if err == nil {
			f.Add(b)
		}
	}
	f.Add(goodResult([]uint32{fakeA, fakeB}))
	f.Fuzz(fuzzOne)
}

func fuzzOne(t *testing.T, data []byte) {
	{
		r := bytes.NewReader(data)
		var buf []byte
		for i := 0; i < 4; i++ {
			p, nb, err := readPDU(r, buf, 1<<20, "fuzz")
			buf = nb
			if err != nil {
				if strings.Contains(err.Error(), "\n") {
					t.Fatalf("error of several lines: %q", err)
				}
				return
			}
			if cap(buf) > 2*len(data)+4096 {
				t.Fatalf("buffer of %d bytes for %d bytes of input", cap(buf), len(data))
			}
			decodeAny(p)
			for _, typ := range []uint32{pduPMNSNames, pduInstance, pduLabel, pduHighresResult, pduResult, pduText} {
				decodeAny(pdu{typ: typ, b: p.b})
			}
		}
	}
}

var _ = source.Result{}

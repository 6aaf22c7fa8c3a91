package pmcd

import (
	"encoding/binary"
	"fmt"
	"io"
	"runtime/debug"
	"strconv"

	"github.com/pcp-exporter/pcp-exporter/internal/pcpwire"
	"github.com/pcp-exporter/pcp-exporter/semantics"
)

// PDU types (libpcp.h PDU_*).
const (
	pduError         = 0x7000
	pduResult        = 0x7001
	pduProfile       = 0x7002
	pduFetch         = 0x7003
	pduDescReq       = 0x7004
	pduDesc          = 0x7005
	pduInstanceReq   = 0x7006
	pduInstance      = 0x7007
	pduTextReq       = 0x7008
	pduText          = 0x7009
	pduCreds         = 0x700c
	pduPMNSIDs       = 0x700d
	pduPMNSNames     = 0x700e
	pduPMNSChild     = 0x700f
	pduPMNSTraverse  = 0x7010
	pduAttr          = 0x7011
	pduLabelReq      = 0x7012
	pduLabel         = 0x7013
	pduHighresFetch  = 0x7014
	pduHighresResult = 0x7015
	pduDescIDs       = 0x7016
	pduDescs         = 0x7017
)

var pduNames = map[uint32]string{
	pduError: "ERROR", pduResult: "RESULT", pduProfile: "PROFILE", pduFetch: "FETCH",
	pduDescReq: "DESC_REQ", pduDesc: "DESC", pduInstanceReq: "INSTANCE_REQ", pduInstance: "INSTANCE",
	pduTextReq: "TEXT_REQ", pduText: "TEXT", pduCreds: "CREDS", pduPMNSIDs: "PMNS_IDS",
	pduPMNSNames: "PMNS_NAMES", pduPMNSChild: "PMNS_CHILD", pduPMNSTraverse: "PMNS_TRAVERSE",
	pduAttr: "ATTR", pduLabelReq: "LABEL_REQ", pduLabel: "LABEL", pduHighresFetch: "HIGHRES_FETCH",
	pduHighresResult: "HIGHRES_RESULT", pduDescIDs: "DESC_IDS", pduDescs: "DESCS",
}

func pduName(t uint32) string {
	if n, ok := pduNames[t]; ok {
		return n
	}
	return "PDU type 0x" + strconv.FormatUint(uint64(t), 16)
}

// Feature bits of pmcd's first PDU (libpcp.h PDU_FLAG_*).
const (
	featSecure    = 0x0001
	featAuth      = 0x0004
	featCredsReqd = 0x0008
	featCertReqd  = 0x0080
	featLabels    = 0x0200
	featHighres   = 0x0400
	featDescs     = 0x0800
)

// PMCD state-change flags, the positive code of an ERROR before a fetch
// reply (pmapi.h PMCD_*).
const (
	pmcdAgentChange    = 0x07
	pmcdLabelChange    = 0x08
	pmcdNamesChange    = 0x10
	pmcdHostnameChange = 0x20
)

const (
	hdrSize = pcpwire.HeaderSize
	// maxRequest is pmcd's default ceiling on a client PDU (pmcd -L).
	maxRequest = 65536
	// DefaultMaxPDU bounds a reply from pmcd (whose own bound is INT_MAX):
	// big results (many processes) are megabytes.
	DefaultMaxPDU = 64 << 20
	// readChunk is how much of a reply must have arrived before its
	// buffer is made its announced size: until then the buffer doubles
	// as bytes arrive, so that a peer announcing a huge PDU costs only
	// what it really sends, and a big PDU is copied once, not at every
	// step (its peak is its size and readChunk).
	readChunk = 1 << 20
	// maxRetained bounds a reply buffer kept for the next reply: a bigger
	// one (a huge reply, or junk) is left to the garbage collector.
	maxRetained = 4 << 20
)

// retain returns buf emptied for reuse, or nil when it is too big to keep
// (and then sets *dropped).
func retain(buf []byte, dropped *bool) []byte {
	if cap(buf) > maxRetained {
		*dropped = true
		return nil
	}
	return buf[:0]
}

// release returns the memory of the reply buffers dropped (see retain) to
// the system once their replies are decoded: left to the garbage
// collector, a 64 MiB buffer stays resident, and its size sets the heap
// goal that the next one grows to (two of them resident at once).
func release(dropped *bool) {
	if *dropped {
		*dropped = false
		debug.FreeOSMemory()
	}
}

// FormatError is a reply from pmcd that breaks the protocol: the peer, the
// PDU and the byte offset in it where decoding failed.
type FormatError struct {
	Peer   string
	PDU    string
	Offset int
	Msg    string
}

// Error names the peer, the PDU and the byte offset.
func (e *FormatError) Error() string {
	return fmt.Sprintf("pmcd at %s: %s at byte %d: %s", e.Peer, e.PDU, e.Offset, e.Msg)
}

// pdu is one PDU read from pmcd: its type and its bytes (header included).
type pdu struct {
	typ uint32
	b   []byte
}

// readPDU reads one PDU into buf (reused when large enough) from r. A
// declared length outside [12, max] is an error before anything more is
// read; the buffer grows with the bytes actually received, and takes the
// announced length only once readChunk bytes of it have arrived.
func readPDU(r io.Reader, buf []byte, max int, peer string) (pdu, []byte, error) {
	if cap(buf) < hdrSize {
		buf = make([]byte, 0, 4096)
	}
	h := buf[:hdrSize]
	if _, err := io.ReadFull(r, h); err != nil {
		if err == io.ErrUnexpectedEOF {
			return pdu{}, buf, fmt.Errorf("pmcd at %s: connection closed within a PDU header", peer)
		}
		return pdu{}, buf, err
	}
	n := int(int32(binary.BigEndian.Uint32(h)))
	typ := binary.BigEndian.Uint32(h[4:])
	if n < hdrSize || n > max {
		return pdu{}, buf, &FormatError{Peer: peer, PDU: pduName(typ), Offset: 0, Msg: fmt.Sprintf("length %d outside [%d, %d]", n, hdrSize, max)}
	}
	for len(h) < n {
		want := n
		if want > cap(h) {
			if len(h) < readChunk {
				want = min(cap(h)*2, readChunk, n)
			}
			nb := make([]byte, len(h), want)
			copy(nb, h)
			h = nb
		}
		m, err := io.ReadFull(r, h[len(h):want])
		h = h[:len(h)+m]
		if err != nil {
			return pdu{}, h, fmt.Errorf("pmcd at %s: %s truncated at byte %d of %d: %w", peer, pduName(typ), len(h), n, err)
		}
	}
	return pdu{typ: typ, b: h}, h, nil
}

// decoder returns a decoder of p's fields after its header; wireErr names
// the peer and p in its errors.
func decoder(p pdu) pcpwire.Decoder {
	d := pcpwire.NewDecoder(p.b, 0, "PDU")
	d.Skip(hdrSize)
	return d
}

// wireErr turns a decoding error of p (a *pcpwire.Error) into a FormatError
// naming the peer and the PDU; other errors are returned as they are.
func wireErr(err error, peer string, p pdu) error {
	if we, ok := err.(*pcpwire.Error); ok {
		return &FormatError{Peer: peer, PDU: pduName(p.typ), Offset: int(we.Offset), Msg: we.Msg}
	}
	return err
}

// errorCode is the code of an ERROR PDU (16 bytes; 20 for the handshake).
func errorCode(p pdu, peer string) (int32, error) {
	if len(p.b) != 16 && len(p.b) != 20 {
		return 0, &FormatError{Peer: peer, PDU: "ERROR", Offset: 0, Msg: fmt.Sprintf("length %d, want 16 or 20", len(p.b))}
	}
	d := decoder(p)
	return d.I32(), nil
}

// v1ToV2 converts a handshake error from PCP 1.x numbering (p_error.c
// XLATE_ERR_1TO2).
func v1ToV2(code int32) int32 {
	if code <= -1000 {
		return code - 11345
	}
	return code
}

// pmErr is a PCP error code as an error.
func pmErr(code int32) error { return semantics.PMError(code) }

package pmcd

import (
	"encoding/binary"
	"fmt"
	"io"
	"runtime/debug"
	"strconv"

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
	hdrSize = 12
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

// decoder reads big-endian fields of one PDU with a sticky error: after the
// first failure every read returns zero and err says where it failed.
type decoder struct {
	b    []byte
	pos  int
	err  error
	peer string
	pdu  string
}

func newDecoder(p pdu, peer string) *decoder {
	return &decoder{b: p.b, pos: hdrSize, peer: peer, pdu: pduName(p.typ)}
}

func (d *decoder) fail(at int, format string, args ...any) {
	if d.err == nil {
		d.err = &FormatError{Peer: d.peer, PDU: d.pdu, Offset: at, Msg: fmt.Sprintf(format, args...)}
	}
	d.pos = len(d.b)
}

func (d *decoder) u32() uint32 {
	if d.err != nil {
		return 0
	}
	if len(d.b)-d.pos < 4 {
		d.fail(d.pos, "truncated: %d bytes left, 4 wanted", len(d.b)-d.pos)
		return 0
	}
	v := binary.BigEndian.Uint32(d.b[d.pos:])
	d.pos += 4
	return v
}

func (d *decoder) i32() int32 { return int32(d.u32()) }

// count reads a count of items of size bytes each that must fit in the rest
// of the PDU (so no allocation exceeds the bytes received).
func (d *decoder) count(size int, what string) int {
	at := d.pos
	n := d.i32()
	if d.err != nil {
		return 0
	}
	if n < 0 || int(n) > (len(d.b)-d.pos)/size {
		d.fail(at, "%s %d does not fit in the %d bytes left", what, n, len(d.b)-d.pos)
		return 0
	}
	return int(n)
}

// bytes reads n bytes and skips the padding to the next 4-byte boundary
// when pad is set (and when the PDU has it).
func (d *decoder) bytes(n int, pad bool) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b)-d.pos {
		d.fail(d.pos, "%d bytes wanted, %d left", n, len(d.b)-d.pos)
		return nil
	}
	v := d.b[d.pos : d.pos+n]
	d.pos += n
	if pad {
		d.pos = min((d.pos+3)&^3, len(d.b))
	}
	return v
}

// end checks that the PDU has been read to its end.
func (d *decoder) end() error {
	if d.err == nil && d.pos != len(d.b) {
		d.fail(d.pos, "%d unexpected bytes after the end", len(d.b)-d.pos)
	}
	return d.err
}

// errorCode is the code of an ERROR PDU (16 bytes; 20 for the handshake).
func errorCode(p pdu, peer string) (int32, error) {
	if len(p.b) != 16 && len(p.b) != 20 {
		return 0, &FormatError{Peer: peer, PDU: "ERROR", Offset: 0, Msg: fmt.Sprintf("length %d, want 16 or 20", len(p.b))}
	}
	return int32(binary.BigEndian.Uint32(p.b[12:])), nil
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

// encoder builds requests into a reused buffer; finish fills in the length.
type encoder struct {
	b     []byte
	start int
}

func (e *encoder) begin(typ uint32) {
	e.start = len(e.b)
	e.b = binary.BigEndian.AppendUint32(e.b, 0)
	e.b = binary.BigEndian.AppendUint32(e.b, typ)
	e.b = binary.BigEndian.AppendUint32(e.b, 0)
}

func (e *encoder) u32(v uint32) { e.b = binary.BigEndian.AppendUint32(e.b, v) }

// str appends a length-prefixed name padded with '~' as libpcp pads.
func (e *encoder) str(s string) {
	e.u32(uint32(len(s)))
	e.b = append(e.b, s...)
	for len(e.b)%4 != 0 {
		e.b = append(e.b, '~')
	}
}

func (e *encoder) finish() {
	binary.BigEndian.PutUint32(e.b[e.start:], uint32(len(e.b)-e.start))
}

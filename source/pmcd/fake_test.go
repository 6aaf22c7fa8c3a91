package pmcd

import (
	"crypto/tls"
	"encoding/binary"
	"io"
	"maps"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
)

// fakePMCD is a minimal pmcd on loopback for fault tests: it serves a tiny
// namespace correctly and lets a test decide how the handshake and the
// fetches are answered (or not).
type fakePMCD struct {
	t  *testing.T
	ln net.Listener
	// greeting replaces the handshake PDU when non-nil.
	greeting func(c net.Conn) bool
	// fetch answers a HIGHRES_FETCH (the request's PMIDs); false closes
	// the connection.
	fetch func(c net.Conn, pmids []uint32) bool
	// prefix names the fake's metrics: PREFIX.a and PREFIX.b ("fake").
	prefix string
	// names, when set, replaces the namespace: the nth name ever in it
	// has the PMID 60.0.n (the PMIDs of other names looked up are as for
	// prefix).
	names []string
	ids   map[string]uint32
	// insts, when set, are the instances (ids 0, 1, ...) of the instance
	// domain 60.1 of both metrics.
	insts []string
	// stall, when set, holds back every answer to a stallType request
	// until it is closed.
	stall     chan struct{}
	stallType uint32
	// itemLabels, when set, is the JSON of one label (name and value of
	// one character each, {"n":"v"}) of both metrics at the item level.
	itemLabels string
	// badLabels, when set, is a metric whose item label's value is not
	// JSON ({"n":xyz}).
	badLabels uint32
	// tls, when set, makes the fake offer TLS with SECURE_ACK and serve
	// over TLS after CREDS (the fetch hook then gets the *tls.Conn).
	tls *tls.Config
	// accepted are the times connections were accepted.
	accepted []time.Time
	// reqs counts the requests received, by PDU type.
	reqs  map[uint32]int
	mu    sync.Mutex
	conns []net.Conn
}

const fakeA, fakeB = 60<<22 | 1, 60<<22 | 2

// newFake starts a fake pmcd; setup (if any) configures it first.
func newFake(t *testing.T, setup ...func(f *fakePMCD)) *fakePMCD {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakePMCD{t: t, ln: ln, prefix: "fake"}
	for _, s := range setup {
		s(f)
	}
	go f.serve()
	t.Cleanup(func() {
		ln.Close()
		f.mu.Lock()
		for _, c := range f.conns {
			c.Close()
		}
		f.mu.Unlock()
	})
	return f
}

func (f *fakePMCD) addr() string { return f.ln.Addr().String() }

func (f *fakePMCD) serve() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		f.conns = append(f.conns, c)
		f.accepted = append(f.accepted, time.Now())
		f.mu.Unlock()
		go f.handle(c)
	}
}

func be(words ...uint32) []byte {
	var b []byte
	for _, w := range words {
		b = binary.BigEndian.AppendUint32(b, w)
	}
	return b
}

// mkpdu builds a PDU of type typ with body.
func mkpdu(typ uint32, body []byte) []byte {
	return append(be(uint32(12+len(body)), typ, 0), body...)
}

func padded(s string) []byte {
	b := append(be(uint32(len(s))), s...)
	for len(b)%4 != 0 {
		b = append(b, '~')
	}
	return b
}

func (f *fakePMCD) handle(c net.Conn) {
	defer c.Close()
	f.mu.Lock()
	greeting, prefix, tlsCfg := f.greeting, f.prefix, f.tls
	f.mu.Unlock()
	if greeting != nil {
		if !greeting(c) {
			return
		}
	} else if tlsCfg != nil {
		c.Write(mkpdu(pduError, be(0, 2<<24|1<<16|featSecure|featSecureAck|featHighres|featDescs|featLabels)))
		if readPDUFrom(c) == nil { // CREDS
			return
		}
		c.Write(mkpdu(pduError, be(0))) // the secure-ack
		tc := tls.Server(c, tlsCfg)
		if tc.Handshake() != nil {
			return
		}
		c = tc
	} else {
		c.Write(mkpdu(pduError, be(0, 2<<24|1<<16|featHighres|featDescs|featLabels)))
	}
	// buffers reused, so that a steady fetch allocates nothing here
	h := make([]byte, 12)
	var body []byte
	var pmids []uint32
	for {
		if _, err := io.ReadFull(c, h); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(h)
		if cap(body) < int(n-12) {
			body = make([]byte, n-12)
		}
		body = body[:n-12]
		if _, err := io.ReadFull(c, body); err != nil {
			return
		}
		var reply []byte
		f.mu.Lock()
		insts, itemLabels, badLabels := f.insts, f.itemLabels, f.badLabels
		if f.reqs == nil {
			f.reqs = map[uint32]int{}
		}
		f.reqs[binary.BigEndian.Uint32(h[4:])]++
		stall := f.stall
		if f.stallType != binary.BigEndian.Uint32(h[4:]) {
			stall = nil
		}
		f.mu.Unlock()
		if stall != nil {
			<-stall
		}
		switch binary.BigEndian.Uint32(h[4:]) {
		case pduCreds, pduProfile:
		case pduPMNSNames:
			numnames := binary.BigEndian.Uint32(body[8:])
			ids := []uint32{2, numnames}
			f.mu.Lock()
			names := f.names
			if f.ids == nil {
				f.ids = map[string]uint32{}
			}
			for _, n := range names {
				if f.ids[n] == 0 {
					f.ids[n] = 60<<22 | uint32(len(f.ids)+1)
				}
			}
			at := 12
			for i := uint32(0); i < numnames; i++ {
				l := int(binary.BigEndian.Uint32(body[at:]))
				id := fakeA + i%2
				if n := string(body[at+4 : at+4+l]); slices.Contains(names, n) {
					id = f.ids[n]
				}
				ids = append(ids, id)
				at += 4 + (l+3)&^3
			}
			f.mu.Unlock()
			reply = mkpdu(pduPMNSIDs, be(ids...))
		case pduPMNSTraverse:
			f.mu.Lock()
			names := f.names
			f.mu.Unlock()
			if names == nil {
				names = []string{prefix + ".a", prefix + ".b"}
			}
			var b []byte
			nstr := 0
			for _, n := range names {
				b = append(b, padded(n)...)
				nstr += len(n) + 1
			}
			reply = mkpdu(pduPMNSNames, append(be(uint32(nstr), 0, uint32(len(names))), b...))
		case pduDescIDs:
			numids := binary.BigEndian.Uint32(body[4:])
			b := be(numids)
			for i := uint32(0); i < numids; i++ {
				id := binary.BigEndian.Uint32(body[8+4*i:])
				indom := uint32(0xffffffff)
				if insts != nil {
					indom = 60<<22 | 1
				}
				b = append(b, be(id, 3, indom, 1, 0)...) // u64 counter
			}
			reply = mkpdu(pduDescs, b)
		case pduTextReq:
			reply = mkpdu(pduText, append(be(0), padded("help")...))
		case pduLabelReq:
			ident, sub := binary.BigEndian.Uint32(body), binary.BigEndian.Uint32(body[4:])
			if sub == labelItem && ident == badLabels && ident != 0 {
				b := be(ident, sub, 0, 1, 0xffffffff, 1, 12+16+16+8, 9, 2<<16|1<<8|uint32(semantics.LabelItem), 5<<16|3)
				reply = mkpdu(pduLabel, append(b, `{"n":xyz}`...))
				break
			}
			if sub == labelItem && itemLabels != "" {
				// one set, one label: name at 2, value at 5 (with quotes)
				b := be(ident, sub, 0, 1, 0xffffffff, 1, 12+16+16+8, uint32(len(itemLabels)), 2<<16|1<<8|uint32(semantics.LabelItem), 5<<16|3)
				reply = mkpdu(pduLabel, append(b, itemLabels...))
				break
			}
			reply = mkpdu(pduLabel, be(ident, sub, 0, 0))
		case pduInstanceReq:
			f.mu.Lock()
			names := f.insts
			f.mu.Unlock()
			b := be(binary.BigEndian.Uint32(body), uint32(len(names)))
			for i, n := range names {
				b = append(append(b, be(uint32(i))...), padded(n)...)
			}
			reply = mkpdu(pduInstance, b)
		case pduHighresFetch:
			numpmid := binary.BigEndian.Uint32(body[12:])
			pmids = pmids[:0]
			for i := uint32(0); i < numpmid; i++ {
				pmids = append(pmids, binary.BigEndian.Uint32(body[16+4*i:]))
			}
			f.mu.Lock()
			fetch := f.fetch
			f.mu.Unlock()
			if fetch == nil {
				reply = goodResult(pmids)
			} else if !fetch(c, pmids) {
				return
			}
		default:
			reply = mkpdu(pduError, be(uint32(0xffffcfb2))) // PM_ERR_IPC
		}
		if reply != nil {
			if _, err := c.Write(reply); err != nil {
				return
			}
		}
	}
}

// goodResult is a HIGHRES_RESULT giving each PMID one U64 value 42.
func goodResult(pmids []uint32) []byte {
	n := uint32(len(pmids))
	sets := be(n, 0, 1, 0, 7)
	blocks := []byte{}
	off := (12 + 20 + 20*n) / 4
	for i, id := range pmids {
		sets = append(sets, be(id, 1, semantics.ValDptr, 0xffffffff, off+uint32(i)*3)...)
		blocks = append(blocks, be(3<<24|12, 0, 42)...)
	}
	return mkpdu(pduHighresResult, append(sets, blocks...))
}

// setFetch sets how fetches are answered from now on (nil: well).
func (f *fakePMCD) setFetch(fetch func(c net.Conn, pmids []uint32) bool) {
	f.mu.Lock()
	f.fetch = fetch
	f.mu.Unlock()
}

// setInsts sets the fake's instances from now on.
func (f *fakePMCD) setInsts(names ...string) {
	f.mu.Lock()
	f.insts = names
	f.mu.Unlock()
}

// stallMetadata holds back the answers to requests of type typ (a
// metadata read: PMNS_TRAVERSE starts a full one, LABEL_REQ a labels-only
// one) from now until release is called (or the test ends).
func (f *fakePMCD) stallMetadata(typ uint32) (release func()) {
	ch := make(chan struct{})
	var once sync.Once
	release = func() {
		once.Do(func() {
			f.mu.Lock()
			f.stall = nil
			f.mu.Unlock()
			close(ch)
		})
	}
	f.mu.Lock()
	f.stall, f.stallType = ch, typ
	f.mu.Unlock()
	f.t.Cleanup(release)
	return release
}

// setItemLabels sets the fake's item labels from now on.
func (f *fakePMCD) setItemLabels(json string) {
	f.mu.Lock()
	f.itemLabels = json
	f.mu.Unlock()
}

// requests returns how many requests of each PDU type the fake received.
func (f *fakePMCD) requests() map[uint32]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.reqs)
}

// setNames sets the fake's namespace from now on (see names).
func (f *fakePMCD) setNames(names ...string) {
	f.mu.Lock()
	f.names = names
	f.mu.Unlock()
}

// connections returns when the fake accepted each connection.
func (f *fakePMCD) connections() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.accepted)
}

package pmcd

import (
	"fmt"
	"time"

	"github.com/pcp-exporter/pcp-exporter/internal/pcpwire"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// client is the pmcd client layer over one connection (conn: the
// handshake, the PDU exchange and its deadlines): each request of the
// protocol (names, descriptors, help texts, labels, instances, fetch:
// fetch.go) is a method that encodes it, exchanges it and decodes the
// replies with internal/pcpwire. The Source above caches what they
// return, reconnects and loads in the background.
type client struct {
	*conn
}

// dial connects to ep and runs the handshake within timeout.
func dial(ep Endpoint, timeout time.Duration, max int) (*client, error) {
	c, err := dialConn(ep, timeout, max)
	if err != nil {
		return nil, err
	}
	return &client{c}, nil
}

// PMNS_NAMES requests are split as libpcp splits them (pmns.c).
const namesBatch = 63 << 10

// descsBatch PMIDs fit in one DESC_IDS request (20 + 4n <= 65536).
const descsBatch = 16000

// readNames traverses the whole namespace.
func (c *client) readNames(deadline time.Time) ([]string, error) {
	c.w.B = c.w.B[:0]
	c.w.Begin(pduPMNSTraverse)
	c.w.U32(0)
	c.w.U32(0)
	c.w.Finish()
	var names []string
	err := c.exchange(deadline, 1, func(_ int, p pdu) error {
		if err := c.expect(p, pduPMNSNames); err != nil {
			return fmt.Errorf("pmcd at %s: traversing the namespace: %w", c.peer, err)
		}
		var err error
		names, _, err = decodeNames(p, c.peer)
		return err
	})
	return names, err
}

// decodeNames decodes a PMNS_NAMES PDU (plain or status form).
func decodeNames(p pdu, peer string) (names []string, status []int32, err error) {
	d := decoder(p)
	d.U32() // nstrbytes
	numstatus := d.I32()
	n := d.Count(8, "numnames")
	if numstatus != 0 && int(numstatus) != n {
		d.Fail(16, "numstatus %d differs from numnames %d", numstatus, n)
	}
	names = make([]string, 0, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		if numstatus != 0 {
			status = append(status, d.I32())
		}
		at := d.Pos()
		l := d.Count(1, "name length")
		b := d.Bytes(l)
		d.Pad()
		if d.Err() == nil && l == 0 {
			d.Fail(at, "empty name")
		}
		names = append(names, string(b))
	}
	return names, status, wireErr(d.End(), peer, p)
}

// lookupNames resolves names to PMIDs (PM_ID_NULL when pmcd has none).
func (c *client) lookupNames(deadline time.Time, names []string) ([]semantics.PMID, error) {
	ids := make([]semantics.PMID, len(names))
	for lo := 0; lo < len(names); {
		hi, size := lo, 24
		for hi < len(names) && (hi == lo || size+8+len(names[hi]) <= namesBatch) {
			size += 8 + len(names[hi])
			hi++
		}
		c.w.B = c.w.B[:0]
		c.w.Begin(pduPMNSNames)
		nstr := 0
		for _, n := range names[lo:hi] {
			nstr += len(n) + 1
		}
		c.w.U32(uint32(nstr))
		c.w.U32(0)
		c.w.U32(uint32(hi - lo))
		for _, n := range names[lo:hi] {
			c.w.Str(n)
		}
		c.w.Finish()
		batch := ids[lo:hi]
		err := c.exchange(deadline, 1, func(_ int, p pdu) error {
			if p.typ == pduError && len(batch) == 1 {
				batch[0] = semantics.PMIDNull // a single failed name is an ERROR
				return c.expect(p, pduError)
			}
			if err := c.expect(p, pduPMNSIDs); err != nil {
				return fmt.Errorf("pmcd at %s: looking up names: %w", c.peer, err)
			}
			d := decoder(p)
			d.I32() // number resolved
			n := d.Count(4, "numids")
			if d.Err() == nil && n != len(batch) {
				d.Fail(16, "%d ids for %d names", n, len(batch))
			}
			for i := 0; i < n && d.Err() == nil; i++ {
				batch[i] = semantics.PMID(d.U32())
			}
			return wireErr(d.End(), c.peer, p)
		})
		if err != nil {
			return nil, err
		}
		lo = hi
	}
	return ids, nil
}

// lookupDescs reads the descriptors of pmids (nil for those pmcd fails).
func (c *client) lookupDescs(deadline time.Time, pmids []semantics.PMID) ([]*semantics.Desc, error) {
	out := make([]*semantics.Desc, len(pmids))
	store := make([]semantics.Desc, len(pmids))
	decode := func(d *pcpwire.Decoder, i int) {
		pmid := semantics.PMID(d.U32())
		desc := semantics.Desc{PMID: pmid, Type: semantics.Type(d.I32()), InDom: semantics.InDom(d.U32()), Sem: semantics.Sem(d.I32()), Units: semantics.UnitsFromWord(d.U32())}
		if d.Err() == nil && pmid != semantics.PMIDNull {
			if pmid != pmids[i] {
				d.Fail(d.Pos()-20, "descriptor of %s where %s was asked for", pmid, pmids[i])
				return
			}
			store[i] = desc
			out[i] = &store[i]
		}
	}
	if c.features&featDescs == 0 {
		c.w.B = c.w.B[:0]
		for _, id := range pmids {
			c.w.Begin(pduDescReq)
			c.w.U32(uint32(id))
			c.w.Finish()
		}
		err := c.exchange(deadline, len(pmids), func(i int, p pdu) error {
			if p.typ == pduError {
				return c.expect(p, pduError)
			}
			if err := c.expect(p, pduDesc); err != nil {
				return err
			}
			d := decoder(p)
			decode(&d, i)
			return wireErr(d.End(), c.peer, p)
		})
		return out, ignorePCPError(err)
	}
	for lo := 0; lo < len(pmids); lo += descsBatch {
		hi := min(lo+descsBatch, len(pmids))
		c.w.B = c.w.B[:0]
		c.w.Begin(pduDescIDs)
		c.w.U32(0xffffffff)
		c.w.U32(uint32(hi - lo))
		for _, id := range pmids[lo:hi] {
			c.w.U32(uint32(id))
		}
		c.w.Finish()
		err := c.exchange(deadline, 1, func(_ int, p pdu) error {
			if p.typ == pduError && hi-lo == 1 {
				return c.expect(p, pduError)
			}
			if err := c.expect(p, pduDescs); err != nil {
				return fmt.Errorf("pmcd at %s: reading descriptors: %w", c.peer, err)
			}
			d := decoder(p)
			n := d.Count(20, "numdescs")
			if d.Err() == nil && n != hi-lo {
				d.Fail(12, "%d descriptors for %d PMIDs", n, hi-lo)
			}
			for i := 0; i < n && d.Err() == nil; i++ {
				decode(&d, lo+i)
			}
			return wireErr(d.End(), c.peer, p)
		})
		if err = ignorePCPError(err); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ignorePCPError drops a PCP error (an ERROR reply for one item), keeping
// I/O and protocol errors.
func ignorePCPError(err error) error {
	if _, ok := err.(semantics.PMError); ok {
		return nil
	}
	return err
}

// Label request types (PM_LABEL_*).

// Text request types (PM_TEXT_*).

// request is one pipelined metadata request, to route its reply.
type request struct {
	kind  uint32 // PDU type of the request
	sub   uint32 // text or label type
	ident uint32
}

// readDetails reads the help texts, labels and instance domains of descs
// in one pipelined exchange, handing each reply to got; labelsOnly reads
// only the labels (the instances are got's already).
func (c *client) readDetails(deadline time.Time, descs []*semantics.Desc, labelsOnly bool, got *details) error {
	var reqs []request
	seen := map[request]bool{}
	add := func(r request) {
		if !seen[r] {
			seen[r] = true
			reqs = append(reqs, r)
		}
	}
	withLabels := c.features&featLabels != 0
	if withLabels {
		add(request{kind: pduLabelReq, sub: labelContext, ident: 0xffffffff})
	}
	for _, d := range descs {
		if d == nil {
			continue
		}
		id := uint32(d.PMID)
		if !labelsOnly {
			add(request{kind: pduTextReq, sub: textOneLine | textPMID, ident: id})
			add(request{kind: pduTextReq, sub: textHelp | textPMID, ident: id})
		}
		if withLabels {
			add(request{kind: pduLabelReq, sub: labelDomain, ident: d.PMID.Domain()})
			add(request{kind: pduLabelReq, sub: labelCluster, ident: uint32(semantics.NewPMID(d.PMID.Domain(), d.PMID.Cluster(), 0))})
			add(request{kind: pduLabelReq, sub: labelItem, ident: id})
		}
		if d.InDom != semantics.InDomNull {
			if !labelsOnly {
				add(request{kind: pduInstanceReq, ident: uint32(d.InDom)})
			}
			if withLabels {
				add(request{kind: pduLabelReq, sub: labelInDom, ident: uint32(d.InDom)})
				add(request{kind: pduLabelReq, sub: labelInstances, ident: uint32(d.InDom)})
			}
		}
	}
	var instLabelsOf []semantics.InDom
	for _, r := range reqs {
		if r.kind == pduLabelReq && r.sub == labelInstances {
			instLabelsOf = append(instLabelsOf, semantics.InDom(r.ident))
		}
	}
	// instance labels only after a fetch from their agents (profile.go)
	flags, err := c.primeAgents(deadline, descs, instLabelsOf)
	c.flags |= flags
	if err != nil {
		return err
	}
	c.w.B = c.w.B[:0]
	for _, r := range reqs {
		c.w.Begin(r.kind)
		switch r.kind {
		case pduTextReq, pduLabelReq:
			c.w.U32(r.ident)
			c.w.U32(r.sub)
		case pduInstanceReq:
			c.w.U32(r.ident)
			c.w.U32(0)
			c.w.U32(0)
			c.w.U32(0xffffffff)
			c.w.U32(0)
		}
		c.w.Finish()
	}
	err = c.exchange(deadline, len(reqs), func(i int, p pdu) error {
		r := reqs[i]
		if p.typ == pduError {
			return ignorePCPError(c.expect(p, pduError))
		}
		switch r.kind {
		case pduTextReq:
			if err := c.expect(p, pduText); err != nil {
				return err
			}
			text, err := decodeText(p, c.peer)
			if err != nil {
				return err
			}
			got.text(r, text)
		case pduInstanceReq:
			if err := c.expect(p, pduInstance); err != nil {
				return err
			}
			insts, cut, err := decodeInstances(p, c.peer, c.limit)
			if err != nil {
				return err
			}
			got.instances(semantics.InDom(r.ident), insts, cut)
		case pduLabelReq:
			if err := c.expect(p, pduLabel); err != nil {
				return err
			}
			sets, err := decodeLabels(p, c.peer, c.limit)
			if err != nil {
				return err
			}
			got.labelSets(r, sets)
		}
		return nil
	})
	if !labelsOnly {
		got.helpFallback(descs)
	}
	return err
}

// decodeText decodes a TEXT PDU.
func decodeText(p pdu, peer string) (string, error) {
	d := decoder(p)
	d.U32() // ident: byte-swapped by little-endian pmcds, ignored as libpcp does
	n := d.Count(1, "buflen")
	text := string(d.Bytes(n))
	d.Pad()
	return text, wireErr(d.Err(), peer, p)
}

// decodeInstances decodes an INSTANCE PDU, keeping the first limit
// instances (all when limit is 0): cut counts the others.
func decodeInstances(p pdu, peer string, limit int) (insts []source.Instance, cut int, _ error) {
	d := decoder(p)
	d.U32() // indom: pmcd's DSO agents echo it in host order; ignored as libpcp does
	n := d.Count(8, "numinst")
	keep := n
	if limit > 0 && n > limit {
		keep, cut = limit, n-limit
	}
	insts = make([]source.Instance, 0, keep)
	for i := 0; i < n && d.Err() == nil; i++ {
		id := d.I32()
		l := d.Count(1, "name length")
		name := d.Bytes(l)
		d.Pad()
		if i < keep {
			insts = append(insts, source.Instance{ID: id, Name: string(name)})
		}
	}
	return insts, cut, wireErr(d.End(), peer, p)
}

// labelSet is one set of a LABEL PDU.
type labelSet struct {
	inst   int32
	labels semantics.LabelSet
	// bad counts the set's labels left out as malformed (a name or value
	// outside the set's JSON text, a value that is not JSON); why is the
	// first one's error.
	bad int
	why string
}

// decodeLabels decodes a LABEL PDU: its sets with their JSON text checked
// against their index, the first limit sets only (all when limit is 0). A
// malformed label is left out of its set (and counted in it); a PDU whose
// layout is broken is an error.
func decodeLabels(p pdu, peer string, limit int) ([]labelSet, error) {
	d := decoder(p)
	d.U32() // ident
	d.U32() // type
	d.U32() // padding
	n := d.Count(16, "nsets")
	if limit > 0 && n > limit {
		n = limit
	}
	sets := make([]labelSet, 0, n)
	var idx []semantics.LabelIndex
	jsonEnd := 0
	for i := 0; i < n && d.Err() == nil; i++ {
		at := d.Pos()
		inst := d.I32()
		nl := d.I32()
		off := int(d.U32())
		jl := int(d.U32())
		if d.Err() != nil {
			break
		}
		if nl < 0 {
			sets = append(sets, labelSet{inst: inst}) // an error code for this set
			continue
		}
		if int(nl) > d.Left()/8 {
			d.Fail(at+4, "nlabels %d does not fit in the PDU", nl)
			break
		}
		// pmcd concatenates the sets' JSON texts and lays each set's
		// labels out in order: anything else is refused, which also
		// bounds the checking to one pass over the PDU
		if jl > 0 && off < jsonEnd || jl < 0 || off < 0 || off > len(d.Buf()) || jl > len(d.Buf())-off {
			d.Fail(at+8, "JSON at %d of %d bytes outside the %d-byte PDU or before the previous set's", off, jl, len(d.Buf()))
			break
		}
		jsonEnd = max(jsonEnd, off+jl)
		idx = idx[:0]
		spanEnd := 0
		for k := 0; k < int(nl) && d.Err() == nil; k++ {
			a, b := d.U32(), d.U32()
			l := semantics.LabelIndex{Name: uint16(a >> 16), NameLen: uint8(a >> 8), Flags: uint8(a), Value: uint16(b >> 16), ValueLen: uint16(b)}
			if int(l.Name) < spanEnd || int(l.Value) < int(l.Name)+int(l.NameLen) {
				d.Fail(d.Pos()-8, "label %d of set %d overlaps the one before", k, i)
			}
			spanEnd = int(l.Value) + int(l.ValueLen)
			idx = append(idx, l)
		}
		if d.Err() != nil {
			break
		}
		text := d.Buf()[off : off+jl]
		ls, err := semantics.LabelSetFromJSONB(text, idx)
		set := labelSet{inst: inst, labels: ls}
		if err != nil {
			set.why = fmt.Sprintf("pmcd at %s: LABEL at byte %d: label set %d: %v", peer, at, i, err)
			good := idx[:0]
			for k := range idx {
				if _, err := semantics.LabelSetFromJSONB(text, idx[k:k+1]); err == nil {
					good = append(good, idx[k])
				}
			}
			set.bad = len(idx) - len(good)
			set.labels, _ = semantics.LabelSetFromJSONB(text, good)
		}
		sets = append(sets, set)
	}
	return sets, wireErr(d.Err(), peer, p)
}

// instances reads instance domains (with their instance labels when pmcd
// has labels) in one pipelined exchange, and hands each to got: its
// instances, those the series limit left out, and its instance label sets
// (labelled: pmcd answered the label request).
func (c *client) instances(deadline time.Time, indoms []semantics.InDom, got func(in semantics.InDom, insts []source.Instance, cut int, sets []labelSet, labelled bool)) error {
	c.w.Reset()
	withLabels := c.features&featLabels != 0
	per := 1
	if withLabels {
		per = 2
	}
	for _, in := range indoms {
		c.w.Begin(pduInstanceReq)
		c.w.U32(uint32(in))
		c.w.U32(0)
		c.w.U32(0)
		c.w.U32(0xffffffff)
		c.w.U32(0)
		c.w.Finish()
		if withLabels {
			c.w.Begin(pduLabelReq)
			c.w.U32(uint32(in))
			c.w.U32(labelInstances)
			c.w.Finish()
		}
	}
	var insts []source.Instance
	var cut int
	return c.exchange(deadline, per*len(indoms), func(i int, p pdu) error {
		in := indoms[i/per]
		if p.typ == pduError {
			if err := ignorePCPError(c.expect(p, pduError)); err != nil {
				return err
			}
			if i%per == 0 {
				insts, cut = nil, 0
				if per == 1 {
					got(in, nil, 0, nil, false)
				}
			} else {
				got(in, insts, cut, nil, false)
			}
			return nil
		}
		if i%per == 0 {
			if err := c.expect(p, pduInstance); err != nil {
				return err
			}
			var err error
			if insts, cut, err = decodeInstances(p, c.peer, c.limit); err != nil {
				return err
			}
			if per == 1 {
				got(in, insts, cut, nil, false)
			}
			return nil
		}
		if err := c.expect(p, pduLabel); err != nil {
			return err
		}
		sets, err := decodeLabels(p, c.peer, c.limit)
		if err != nil {
			return err
		}
		got(in, insts, cut, sets, true)
		return nil
	})
}

package pmcd

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// metadata is everything read from pmcd about the selected metrics: read
// once per connection and again when pmcd flags a change.
type metadata struct {
	names   []string         // the selected names, in order
	ids     []semantics.PMID // their PMIDs (PM_ID_NULL: none)
	metrics []source.Metric  // selected, resolved metrics in name order
	descs   map[semantics.PMID]*semantics.Desc
	indoms  map[semantics.InDom]*indom
	context semantics.LabelSet
	// shared holds the skeleton whose names, ids, metrics and descs
	// these are (shared.go): they are never modified.
	shared *skeleton
	// unresolved counts selected names pmcd gave no PMID or descriptor for.
	unresolved int
	// malformed counts the labels left out as malformed, by the label
	// request (type and ident) that got them; why is an example.
	malformed map[[2]uint32]int
	why       string
}

// noteMalformed records how many labels the answer to the label request
// of sub and ident left out as malformed (sets, all of that answer).
func (md *metadata) noteMalformed(sub, ident uint32, sets []labelSet) {
	n := 0
	for _, ls := range sets {
		if ls.bad > 0 && n == 0 {
			md.why = labelsOf(sub, ident, ls.inst) + ": " + ls.why
		}
		n += ls.bad
	}
	key := [2]uint32{sub, ident}
	if n == 0 {
		delete(md.malformed, key)
		return
	}
	if md.malformed == nil {
		md.malformed = map[[2]uint32]int{}
	}
	md.malformed[key] = n
}

// labelsOf names the labels of a label request's set.
func labelsOf(sub, ident uint32, inst int32) string {
	switch sub {
	case labelContext:
		return "the context's labels"
	case labelDomain:
		return fmt.Sprintf("the labels of domain %d", ident)
	case labelInDom:
		return "the labels of instance domain " + semantics.InDom(ident).String()
	case labelCluster:
		id := semantics.PMID(ident)
		return fmt.Sprintf("the labels of cluster %d.%d", id.Domain(), id.Cluster())
	case labelItem:
		return "the labels of metric " + semantics.PMID(ident).String()
	}
	return fmt.Sprintf("the labels of instance %d of instance domain %s", inst, semantics.InDom(ident))
}

// malformedLabels is how many labels md left out as malformed.
func (md *metadata) malformedLabels() int {
	n := 0
	for _, v := range md.malformed {
		n += v
	}
	return n
}

// indom is an instance domain's instances in id order, and an index of
// their ids.
type indom struct {
	insts []source.Instance // in id order
	// cut counts the instances left out by the series limit.
	cut int
}

// has says whether the instance domain has instance id (a binary search:
// a map per instance domain cost a fleet's pooled targets more than their
// instances).
func (in *indom) has(id int32) bool {
	_, ok := slices.BinarySearchFunc(in.insts, id, func(i source.Instance, id int32) int { return cmp.Compare(i.ID, id) })
	return ok
}

// PMNS_NAMES requests are split as libpcp splits them (pmns.c).
const namesBatch = 63 << 10

// descsBatch PMIDs fit in one DESC_IDS request (20 + 4n <= 65536).
const descsBatch = 16000

// readNames traverses the whole namespace.
func (c *conn) readNames(deadline time.Time) ([]string, error) {
	c.w.b = c.w.b[:0]
	c.w.begin(pduPMNSTraverse)
	c.w.u32(0)
	c.w.u32(0)
	c.w.finish()
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
	d := newDecoder(p, peer)
	d.u32() // nstrbytes
	numstatus := d.i32()
	n := d.count(8, "numnames")
	if numstatus != 0 && int(numstatus) != n {
		d.fail(16, "numstatus %d differs from numnames %d", numstatus, n)
	}
	names = make([]string, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		if numstatus != 0 {
			status = append(status, d.i32())
		}
		at := d.pos
		l := d.count(1, "name length")
		b := d.bytes(l, true)
		if d.err == nil && l == 0 {
			d.fail(at, "empty name")
		}
		names = append(names, string(b))
	}
	return names, status, d.end()
}

// lookupNames resolves names to PMIDs (PM_ID_NULL when pmcd has none).
func (c *conn) lookupNames(deadline time.Time, names []string) ([]semantics.PMID, error) {
	ids := make([]semantics.PMID, len(names))
	for lo := 0; lo < len(names); {
		hi, size := lo, 24
		for hi < len(names) && (hi == lo || size+8+len(names[hi]) <= namesBatch) {
			size += 8 + len(names[hi])
			hi++
		}
		c.w.b = c.w.b[:0]
		c.w.begin(pduPMNSNames)
		nstr := 0
		for _, n := range names[lo:hi] {
			nstr += len(n) + 1
		}
		c.w.u32(uint32(nstr))
		c.w.u32(0)
		c.w.u32(uint32(hi - lo))
		for _, n := range names[lo:hi] {
			c.w.str(n)
		}
		c.w.finish()
		batch := ids[lo:hi]
		err := c.exchange(deadline, 1, func(_ int, p pdu) error {
			if p.typ == pduError && len(batch) == 1 {
				batch[0] = semantics.PMIDNull // a single failed name is an ERROR
				return c.expect(p, pduError)
			}
			if err := c.expect(p, pduPMNSIDs); err != nil {
				return fmt.Errorf("pmcd at %s: looking up names: %w", c.peer, err)
			}
			d := newDecoder(p, c.peer)
			d.i32() // number resolved
			n := d.count(4, "numids")
			if d.err == nil && n != len(batch) {
				d.fail(16, "%d ids for %d names", n, len(batch))
			}
			for i := 0; i < n && d.err == nil; i++ {
				batch[i] = semantics.PMID(d.u32())
			}
			return d.end()
		})
		if err != nil {
			return nil, err
		}
		lo = hi
	}
	return ids, nil
}

// lookupDescs reads the descriptors of pmids (nil for those pmcd fails).
func (c *conn) lookupDescs(deadline time.Time, pmids []semantics.PMID) ([]*semantics.Desc, error) {
	out := make([]*semantics.Desc, len(pmids))
	store := make([]semantics.Desc, len(pmids))
	decode := func(d *decoder, i int) {
		pmid := semantics.PMID(d.u32())
		desc := semantics.Desc{PMID: pmid, Type: semantics.Type(d.i32()), InDom: semantics.InDom(d.u32()), Sem: semantics.Sem(d.i32()), Units: semantics.UnitsFromWord(d.u32())}
		if d.err == nil && pmid != semantics.PMIDNull {
			if pmid != pmids[i] {
				d.fail(d.pos-20, "descriptor of %s where %s was asked for", pmid, pmids[i])
				return
			}
			store[i] = desc
			out[i] = &store[i]
		}
	}
	if c.features&featDescs == 0 {
		c.w.b = c.w.b[:0]
		for _, id := range pmids {
			c.w.begin(pduDescReq)
			c.w.u32(uint32(id))
			c.w.finish()
		}
		err := c.exchange(deadline, len(pmids), func(i int, p pdu) error {
			if p.typ == pduError {
				return c.expect(p, pduError)
			}
			if err := c.expect(p, pduDesc); err != nil {
				return err
			}
			d := newDecoder(p, c.peer)
			decode(d, i)
			return d.end()
		})
		return out, ignorePCPError(err)
	}
	for lo := 0; lo < len(pmids); lo += descsBatch {
		hi := min(lo+descsBatch, len(pmids))
		c.w.b = c.w.b[:0]
		c.w.begin(pduDescIDs)
		c.w.u32(0xffffffff)
		c.w.u32(uint32(hi - lo))
		for _, id := range pmids[lo:hi] {
			c.w.u32(uint32(id))
		}
		c.w.finish()
		err := c.exchange(deadline, 1, func(_ int, p pdu) error {
			if p.typ == pduError && hi-lo == 1 {
				return c.expect(p, pduError)
			}
			if err := c.expect(p, pduDescs); err != nil {
				return fmt.Errorf("pmcd at %s: reading descriptors: %w", c.peer, err)
			}
			d := newDecoder(p, c.peer)
			n := d.count(20, "numdescs")
			if d.err == nil && n != hi-lo {
				d.fail(12, "%d descriptors for %d PMIDs", n, hi-lo)
			}
			for i := 0; i < n && d.err == nil; i++ {
				decode(d, lo+i)
			}
			return d.end()
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
const (
	labelContext   = 0x01
	labelDomain    = 0x02
	labelInDom     = 0x04
	labelCluster   = 0x08
	labelItem      = 0x10
	labelInstances = 0x20
)

// Text request types (PM_TEXT_*).
const (
	textOneLine = 1
	textHelp    = 2
	textPMID    = 4
)

// request is one pipelined metadata request, to route its reply.
type request struct {
	kind  uint32 // PDU type of the request
	sub   uint32 // text or label type
	ident uint32
}

// readDetails reads the help texts, labels and instance domains of descs
// in one pipelined exchange; labelsOnly reads only the labels (the
// instances are md's already).
func (c *conn) readDetails(deadline time.Time, descs []*semantics.Desc, md *metadata, oneline, help map[semantics.PMID]string, labels map[request]semantics.LabelSet, labelsOnly bool) error {
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
	c.w.b = c.w.b[:0]
	for _, r := range reqs {
		c.w.begin(r.kind)
		switch r.kind {
		case pduTextReq, pduLabelReq:
			c.w.u32(r.ident)
			c.w.u32(r.sub)
		case pduInstanceReq:
			c.w.u32(r.ident)
			c.w.u32(0)
			c.w.u32(0)
			c.w.u32(0xffffffff)
			c.w.u32(0)
		}
		c.w.finish()
	}
	instLabels := map[semantics.InDom]map[int32]semantics.LabelSet{}
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
			d := newDecoder(p, c.peer)
			d.u32() // ident: byte-swapped by little-endian pmcds, ignored as libpcp does
			n := d.count(1, "buflen")
			text := string(d.bytes(n, true))
			if d.err != nil {
				return d.err
			}
			if r.sub&textOneLine != 0 {
				oneline[semantics.PMID(r.ident)] = text
			} else {
				help[semantics.PMID(r.ident)] = text
			}
		case pduInstanceReq:
			if err := c.expect(p, pduInstance); err != nil {
				return err
			}
			insts, cut, err := decodeInstances(p, c.peer, c.limit)
			if err != nil {
				return err
			}
			md.setInstances(semantics.InDom(r.ident), insts, instLabels[semantics.InDom(r.ident)])
			md.indoms[semantics.InDom(r.ident)].cut = cut
		case pduLabelReq:
			if err := c.expect(p, pduLabel); err != nil {
				return err
			}
			sets, err := decodeLabels(p, c.peer, c.limit)
			if err != nil {
				return err
			}
			md.noteMalformed(r.sub, r.ident, sets)
			if r.sub == labelInstances {
				m := map[int32]semantics.LabelSet{}
				for _, s := range sets {
					m[s.inst] = s.labels
				}
				instLabels[semantics.InDom(r.ident)] = m
				if in := md.indoms[semantics.InDom(r.ident)]; in != nil {
					for k := range in.insts {
						in.insts[k].Labels = m[in.insts[k].ID]
					}
				}
			} else if len(sets) > 0 {
				labels[r] = sets[0].labels
			}
		}
		return nil
	})
	if !labelsOnly {
		// pmLookupText(PM_TEXT_HELP) answers the one-line text where pmcd
		// has no long text or an empty one (libpcp's help.c, fallbacktext)
		for _, d := range descs {
			if d != nil && help[d.PMID] == "" {
				help[d.PMID] = oneline[d.PMID]
			}
		}
	}
	return err
}

// setInstances records an instance domain's instances (sorted by id) with
// their labels when known.
func (md *metadata) setInstances(id semantics.InDom, insts []source.Instance, labels map[int32]semantics.LabelSet) {
	sort.SliceStable(insts, func(i, j int) bool { return insts[i].ID < insts[j].ID })
	in := &indom{insts: insts}
	for k := range insts {
		insts[k].Labels = labels[insts[k].ID]
	}
	md.indoms[id] = in
}

// decodeInstances decodes an INSTANCE PDU, keeping the first limit
// instances (all when limit is 0): cut counts the others.
func decodeInstances(p pdu, peer string, limit int) (insts []source.Instance, cut int, _ error) {
	d := newDecoder(p, peer)
	d.u32() // indom: pmcd's DSO agents echo it in host order; ignored as libpcp does
	n := d.count(8, "numinst")
	keep := n
	if limit > 0 && n > limit {
		keep, cut = limit, n-limit
	}
	insts = make([]source.Instance, 0, keep)
	for i := 0; i < n && d.err == nil; i++ {
		id := d.i32()
		l := d.count(1, "name length")
		name := d.bytes(l, true)
		if i < keep {
			insts = append(insts, source.Instance{ID: id, Name: string(name)})
		}
	}
	return insts, cut, d.end()
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
	d := newDecoder(p, peer)
	d.u32() // ident
	d.u32() // type
	d.u32() // padding
	n := d.count(16, "nsets")
	if limit > 0 && n > limit {
		n = limit
	}
	sets := make([]labelSet, 0, n)
	var idx []semantics.LabelIndex
	jsonEnd := 0
	for i := 0; i < n && d.err == nil; i++ {
		at := d.pos
		inst := d.i32()
		nl := d.i32()
		off := int(d.u32())
		jl := int(d.u32())
		if d.err != nil {
			break
		}
		if nl < 0 {
			sets = append(sets, labelSet{inst: inst}) // an error code for this set
			continue
		}
		if int(nl) > (len(d.b)-d.pos)/8 {
			d.fail(at+4, "nlabels %d does not fit in the PDU", nl)
			break
		}
		// pmcd concatenates the sets' JSON texts and lays each set's
		// labels out in order: anything else is refused, which also
		// bounds the checking to one pass over the PDU
		if jl > 0 && off < jsonEnd || jl < 0 || off < 0 || off > len(d.b) || jl > len(d.b)-off {
			d.fail(at+8, "JSON at %d of %d bytes outside the %d-byte PDU or before the previous set's", off, jl, len(d.b))
			break
		}
		jsonEnd = max(jsonEnd, off+jl)
		idx = idx[:0]
		spanEnd := 0
		for k := 0; k < int(nl) && d.err == nil; k++ {
			a, b := d.u32(), d.u32()
			l := semantics.LabelIndex{Name: uint16(a >> 16), NameLen: uint8(a >> 8), Flags: uint8(a), Value: uint16(b >> 16), ValueLen: uint16(b)}
			if int(l.Name) < spanEnd || int(l.Value) < int(l.Name)+int(l.NameLen) {
				d.fail(d.pos-8, "label %d of set %d overlaps the one before", k, i)
			}
			spanEnd = int(l.Value) + int(l.ValueLen)
			idx = append(idx, l)
		}
		if d.err != nil {
			break
		}
		text := d.b[off : off+jl]
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
	return sets, d.err
}

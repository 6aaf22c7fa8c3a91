package pcplog

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// .meta record types (libpcp.h).
const (
	typeDesc       = 1
	typeInDomV2    = 2
	typeLabelV2    = 3
	typeText       = 4
	typeInDom      = 5
	typeInDomDelta = 6
	typeLabel      = 7
)

// Help text kinds (PM_TEXT_*).
const (
	textOneLine = 1
	textHelp    = 2
	textPMID    = 4
	textInDom   = 8
)

const maxLabelsPerSet = 255

// decoder is a sticky-error reader of one record held in memory. Offsets in
// errors are file offsets (base + position).
type decoder struct {
	b    []byte
	pos  int
	base int64
	file string
	what string
	err  error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = &FormatError{File: d.file, Off: d.base + int64(d.pos), Msg: d.what + ": " + fmt.Sprintf(format, args...)}
	}
}

func (d *decoder) left() int { return len(d.b) - d.pos }

func (d *decoder) u32() uint32 {
	if d.err != nil {
		return 0
	}
	if d.left() < 4 {
		d.fail("record too short (need 4 bytes, %d left)", d.left())
		return 0
	}
	v := be32(d.b[d.pos:])
	d.pos += 4
	return v
}

func (d *decoder) i32() int32 { return int32(d.u32()) }

func (d *decoder) bytes(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > d.left() {
		d.fail("length %d exceeds the %d bytes left in the record", n, d.left())
		return nil
	}
	b := d.b[d.pos : d.pos+n]
	d.pos += n
	return b
}

// count reads an int32 count of items of at least size bytes each and checks
// that they fit in the record, bounding any allocation by the record size.
func (d *decoder) count(size int, what string) int {
	n := d.i32()
	if d.err != nil {
		return 0
	}
	if n < 0 || int64(n)*int64(size) > int64(d.left()) {
		d.pos -= 4
		d.fail("%s %d does not fit in the %d bytes left", what, n, d.left())
		return 0
	}
	return int(n)
}

func (d *decoder) stamp(v3 bool) time.Time {
	if v3 {
		b := d.bytes(12)
		if b == nil {
			return time.Time{}
		}
		return TimeV3(b)
	}
	b := d.bytes(8)
	if b == nil {
		return time.Time{}
	}
	return TimeV2(b)
}

type metricInfo struct {
	desc  semantics.Desc
	names []string
}

// indomSnap is an instance domain from a time on.
type indomSnap struct {
	t    time.Time
	node *indomNode
}

// InDomRecord is one instance-domain record of an archive's .meta file:
// the set of instances in force from Time on, held whole or as a delta on
// the record before it.
type InDomRecord struct {
	Time time.Time
	node *indomNode
	m    *meta
}

// AppendInDomRecords appends the records of indom to out, in file order.
func (a *Archive) AppendInDomRecords(out []InDomRecord, indom semantics.InDom) []InDomRecord {
	m := a.state().meta
	for _, s := range m.indoms[indom] {
		out = append(out, InDomRecord{Time: s.t, node: s.node, m: m})
	}
	return out
}

// Changes calls f with each instance added or removed (gone) by rec when
// rec is held as a delta on prev, and reports whether it is.
func (rec InDomRecord) Changes(prev InDomRecord, f func(id int32, gone bool)) bool {
	if rec.node.base == nil || rec.node.base != prev.node {
		return false
	}
	for _, op := range rec.node.ops {
		f(op.in.ID, op.del)
	}
	return true
}

// Instances returns the instances rec holds, sorted by id, labels unset.
func (rec InDomRecord) Instances() []source.Instance { return rec.m.materialize(rec.node) }

// indomNode holds an instance domain as a full list of instances or as
// the delta record that changed an earlier one, so that the metadata of an
// archive with many deltas stays bounded by its .meta file (full copies of
// B instances for D deltas cost B x D). A delta chain is cut by a full
// copy once it holds as many changes as the domain has instances: copies
// cost at most the deltas read, and materializing a node costs the size
// of the domain plus at most as many changes.
type indomNode struct {
	base  *indomNode
	full  []source.Instance // base == nil: the domain, sorted by id; Labels unset
	ops   []deltaOp         // base != nil: the changes, sorted by id
	n     int               // instances in the domain
	chain int               // changes since the full list
}

// deltaOp is one instance of a delta record: added, or removed (del).
type deltaOp struct {
	in  source.Instance
	del bool
}

// matCache is the last node materialized, with its instances.
type matCache struct {
	node  *indomNode
	insts []source.Instance
}

type labelKey struct {
	typ   semantics.LabelType
	ident uint32
}

type instLabels struct {
	inst   uint32
	labels semantics.LabelSet
}

type labelRec struct {
	t    time.Time
	sets []instLabels
}

type textKey struct {
	kind  int32 // textOneLine|textPMID and so on
	ident uint32
}

// meta is an immutable snapshot of the metadata. Refresh builds a new one.
type meta struct {
	descs  map[semantics.PMID]*metricInfo
	names  map[string]semantics.PMID
	indoms map[semantics.InDom][]indomSnap
	labels map[labelKey][]labelRec
	texts  map[textKey]string
	off    int64 // bytes of .meta consumed
	// pending is the length of the incomplete record at off (0: none):
	// the file is not read again before it holds that much more.
	pending int64
	mat     atomic.Pointer[matCache]
	// states helps parsing deltas; a clone shares it (the node it was
	// made for tells whether it still holds)
	states map[semantics.InDom]*indomState
}

func newMeta() *meta {
	return &meta{
		descs:  map[semantics.PMID]*metricInfo{},
		names:  map[string]semantics.PMID{},
		indoms: map[semantics.InDom][]indomSnap{},
		labels: map[labelKey][]labelRec{},
		texts:  map[textKey]string{},
	}
}

// clone returns a copy that can be extended without disturbing readers of m.
func (m *meta) clone() *meta {
	n := &meta{
		descs:   make(map[semantics.PMID]*metricInfo, len(m.descs)),
		names:   make(map[string]semantics.PMID, len(m.names)),
		indoms:  make(map[semantics.InDom][]indomSnap, len(m.indoms)),
		labels:  make(map[labelKey][]labelRec, len(m.labels)),
		texts:   make(map[textKey]string, len(m.texts)),
		off:     m.off,
		pending: m.pending,
		states:  m.states,
	}
	for k, v := range m.descs {
		n.descs[k] = v
	}
	for k, v := range m.names {
		n.names[k] = v
	}
	for k, v := range m.indoms {
		n.indoms[k] = v[:len(v):len(v)]
	}
	for k, v := range m.labels {
		n.labels[k] = v[:len(v):len(v)]
	}
	for k, v := range m.texts {
		n.texts[k] = v
	}
	return n
}

// reserve sizes the empty maps of m for the records of b, from their
// headers alone, so that a first parse grows no map.
func (m *meta) reserve(b []byte) {
	descs, texts := 0, 0
	for pos := 0; len(b)-pos >= 8; {
		n := int(int32(be32(b[pos:])))
		if n < 12 || n > len(b)-pos {
			break
		}
		switch be32(b[pos+4:]) {
		case typeDesc:
			descs++
		case typeText:
			texts++
		}
		pos += n
	}
	if descs > 0 && len(m.descs) == 0 && len(m.names) == 0 {
		m.descs = make(map[semantics.PMID]*metricInfo, descs)
		m.names = make(map[string]semantics.PMID, descs)
	}
	if texts > 0 && len(m.texts) == 0 {
		m.texts = make(map[textKey]string, texts)
	}
}

// notePending records the length of the incomplete record that rest (what
// follows the records parsed) starts, so that the file is not read again
// before it holds that record.
func (m *meta) notePending(rest []byte) {
	m.pending = 0
	if len(rest) >= 4 {
		m.pending = int64(int32(be32(rest)))
	}
}

// parse adds the records of b, the part of the .meta file that starts at
// file offset m.off. It stops cleanly before a truncated last record (the
// writer may still be at work) and returns the bytes consumed.
func (m *meta) parse(file string, b []byte) (int, error) {
	if len(m.descs) == 0 {
		m.reserve(b)
	}
	pos := 0
	for len(b)-pos >= 4 {
		off := m.off + int64(pos)
		n := int(int32(be32(b[pos:])))
		if n < 12 {
			return pos, &FormatError{File: file, Off: off, Msg: fmt.Sprintf("metadata record length %d too small", n)}
		}
		if n > len(b)-pos {
			break // truncated: wait for more
		}
		rec := b[pos : pos+n]
		if t := int(int32(be32(rec[n-4:]))); t != n {
			return pos, &FormatError{File: file, Off: off + int64(n) - 4, Msg: fmt.Sprintf("metadata record trailer length %d != header %d", t, n)}
		}
		d := &decoder{b: rec[:n-4], pos: 8, base: off, file: file}
		typ := be32(rec[4:])
		var err error
		switch typ {
		case typeDesc:
			d.what = "desc record"
			m.parseDesc(d)
		case typeInDomV2, typeInDom, typeInDomDelta:
			d.what = "indom record"
			m.parseInDom(d, typ)
		case typeLabelV2, typeLabel:
			d.what = "label record"
			m.parseLabel(d, typ == typeLabel)
		case typeText:
			d.what = "text record"
			m.parseText(d)
		default:
			err = &FormatError{File: file, Off: off + 4, Msg: fmt.Sprintf("unknown metadata record type %d", typ)}
		}
		if err == nil {
			err = d.err
		}
		if err != nil {
			return pos, err
		}
		pos += n
	}
	return pos, nil
}

func (m *meta) parseDesc(d *decoder) {
	var desc semantics.Desc
	desc.PMID = semantics.PMID(d.u32())
	desc.Type = semantics.Type(d.i32())
	desc.InDom = semantics.InDom(d.u32())
	desc.Sem = semantics.Sem(d.i32())
	desc.Units = semantics.UnitsFromWord(d.u32())
	nn := d.count(4, "number of names")
	names := make([]string, 0, nn)
	for i := 0; i < nn && d.err == nil; i++ {
		l := d.i32()
		name := d.bytes(int(l))
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i] // libpcp's names end at the first NUL
		}
		if d.err == nil && len(name) == 0 {
			d.fail("empty metric name")
		}
		names = append(names, string(name))
	}
	if d.err != nil {
		return
	}
	mi := m.descs[desc.PMID]
	if mi == nil {
		mi = &metricInfo{desc: desc}
	} else {
		c := *mi // copy on write: older snapshots keep theirs
		c.names = c.names[:len(c.names):len(c.names)]
		mi = &c
	}
	for _, n := range names {
		if _, dup := m.names[n]; dup {
			continue
		}
		m.names[n] = desc.PMID
		mi.names = append(mi.names, n)
	}
	m.descs[desc.PMID] = mi
}

func (m *meta) parseInDom(d *decoder, typ uint32) {
	t := d.stamp(typ != typeInDomV2)
	indom := semantics.InDom(d.u32())
	n := d.count(8, "number of instances")
	if d.err != nil {
		return
	}
	idsOff := d.pos
	ids := d.bytes(4 * n)
	idx := d.bytes(4 * n)
	strs := d.b[d.pos:]
	insts := make([]source.Instance, n)
	del := make([]bool, n)
	for i := 0; i < n; i++ {
		insts[i].ID = int32(be32(ids[4*i:]))
		if insts[i].ID < 0 {
			d.pos = idsOff + 4*i
			d.fail("negative instance id %d", insts[i].ID)
			return
		}
		si := int32(be32(idx[4*i:]))
		if si == -1 && typ == typeInDomDelta {
			del[i] = true
			continue
		}
		if si < 0 || int(si) >= len(strs) {
			d.fail("instance %d: name offset %d outside the %d-byte string table", insts[i].ID, si, len(strs))
			return
		}
		e := bytes.IndexByte(strs[si:], 0)
		if e < 0 {
			d.fail("instance %d: name at offset %d is not NUL terminated", insts[i].ID, si)
			return
		}
		insts[i].Name = string(strs[si : int(si)+e])
	}
	if n == 0 {
		return // libpcp drops empty indom records
	}
	snaps := m.indoms[indom]
	var node *indomNode
	if typ == typeInDomDelta {
		var prev *indomSnap
		for i := len(snaps) - 1; i >= 0; i-- {
			if !snaps[i].t.After(t) {
				prev = &snaps[i]
				break
			}
		}
		if prev == nil {
			d.pos = 8
			d.fail("delta for indom %s without an earlier full record", indom)
			return
		}
		ops := make([]deltaOp, n)
		for i := range insts {
			ops[i] = deltaOp{insts[i], del[i]}
		}
		sort.SliceStable(ops, func(i, j int) bool { return ops[i].in.ID < ops[j].in.ID })
		st := m.parseState(indom, prev.node)
		changed := false
		for _, op := range ops {
			_, present := st.insts[op.in.ID]
			switch {
			case op.del && present:
				delete(st.insts, op.in.ID)
				changed = true
			case !op.del && !present:
				st.insts[op.in.ID] = op.in
				changed = true
			}
		}
		if !changed && prev.t.Equal(t) {
			return // the same instances at the same time: a duplicate
		}
		node = &indomNode{base: prev.node, ops: ops, n: len(st.insts), chain: prev.node.chain + len(ops)}
		if node.chain >= max(node.n, 64) {
			full := st.list()
			node = &indomNode{full: full, n: len(full)}
		}
		st.node = node
	} else {
		sort.SliceStable(insts, func(i, j int) bool { return insts[i].ID < insts[j].ID })
		node = &indomNode{full: insts, n: len(insts)}
	}
	// insert in time order after any record with the same time, unless
	// it repeats the last of them (libpcp drops duplicates)
	i := sort.Search(len(snaps), func(i int) bool { return snaps[i].t.After(t) })
	if typ != typeInDomDelta && i > 0 && snaps[i-1].t.Equal(t) && snaps[i-1].node.n == len(insts) && sameInsts(m.materialize(snaps[i-1].node), insts) {
		return
	}
	m.indoms[indom] = slices.Insert(snaps, i, indomSnap{t: t, node: node})
}

// indomState is the instances of the last node parsed for a domain, as a
// map that the next delta changes in place: parsing a delta costs its own
// size, not the domain's.
type indomState struct {
	node  *indomNode
	insts map[int32]source.Instance
}

// parseState returns the state of node, made from its instances unless
// it is the one kept.
func (m *meta) parseState(indom semantics.InDom, node *indomNode) *indomState {
	st := m.states[indom]
	if st != nil && st.node == node {
		return st
	}
	ins := m.materialize(node)
	st = &indomState{node: node, insts: make(map[int32]source.Instance, len(ins))}
	for _, in := range ins {
		if _, dup := st.insts[in.ID]; !dup {
			st.insts[in.ID] = in
		}
	}
	if m.states == nil {
		m.states = map[semantics.InDom]*indomState{}
	}
	m.states[indom] = st
	return st
}

// list returns the instances sorted by id.
func (st *indomState) list() []source.Instance {
	out := make([]source.Instance, 0, len(st.insts))
	for _, in := range st.insts {
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// materialize returns the instances of a node, sorted by id: shared, not
// to be changed. The last one made is kept, for the replay that asks for
// the same domain fetch after fetch.
func (m *meta) materialize(n *indomNode) []source.Instance {
	if n.base == nil {
		return n.full
	}
	if c := m.mat.Load(); c != nil && c.node == n {
		return c.insts
	}
	var chain []*indomNode
	for ; n.base != nil; n = n.base {
		chain = append(chain, n)
	}
	k := 0
	for _, c := range chain {
		k += len(c.ops)
	}
	ops := make([]deltaOp, 0, k)
	for i := len(chain) - 1; i >= 0; i-- { // oldest first
		ops = append(ops, chain[i].ops...)
	}
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].in.ID < ops[j].in.ID })
	insts := applyOps(n.full, ops)
	m.mat.Store(&matCache{chain[0], insts})
	return insts
}

// walkInDom goes through the records of a domain in time order, calling f
// with each record's index for every instance the record lists anew or
// renames (gone false) and every one it removes (gone true), as the
// instance lists materialize gives would change from one record to the
// next; instances a record carries unchanged are not visited, so the walk
// costs the records' own sizes, not the domain's size times their number.
// It returns the instances (id -> name) of the last record.
func (m *meta) walkInDom(indom semantics.InDom, f func(k int, in source.Instance, gone bool)) map[int32]string {
	snaps := m.indoms[indom]
	cur := map[int32]string{}
	var prev *indomNode
	for k, s := range snaps {
		n := s.node
		if n.base == nil || n.base != prev {
			// a full list (or a delta on another record than the one
			// before: taken whole): what it lacks is gone
			list := m.materialize(n)
			next := make(map[int32]string, len(list))
			for _, in := range list {
				if _, dup := next[in.ID]; !dup {
					next[in.ID] = in.Name
					f(k, in, false)
				}
			}
			for id, name := range cur {
				if _, ok := next[id]; !ok {
					f(k, source.Instance{ID: id, Name: name}, true)
				}
			}
			cur = next
		} else {
			for _, op := range n.ops {
				name, present := cur[op.in.ID]
				switch {
				case op.del && present:
					delete(cur, op.in.ID)
					f(k, source.Instance{ID: op.in.ID, Name: name}, true)
				case !op.del && !present:
					cur[op.in.ID] = op.in.Name
					f(k, op.in, false)
				}
			}
		}
		prev = n
	}
	return cur
}

// applyOps applies changes (sorted by id, those of one id in the order of
// their records) to base (sorted by id). An instance added again keeps its
// first name; one removed and added again takes the new one.
func applyOps(base []source.Instance, ops []deltaOp) []source.Instance {
	out := make([]source.Instance, 0, len(base)+len(ops))
	i, j := 0, 0
	for i < len(base) || j < len(ops) {
		if j == len(ops) || i < len(base) && base[i].ID < ops[j].in.ID {
			out = append(out, base[i])
			i++
			continue
		}
		id := ops[j].in.ID
		i2 := i
		for i2 < len(base) && base[i2].ID == id {
			i2++
		}
		present := i2 > i
		var in source.Instance
		if present {
			in = base[i]
		}
		kept := present // the base's entries stand as they are
		for ; j < len(ops) && ops[j].in.ID == id; j++ {
			switch {
			case ops[j].del:
				present, kept = false, false
			case !present:
				present, in = true, ops[j].in
			}
		}
		switch {
		case kept:
			out = append(out, base[i:i2]...)
		case present:
			out = append(out, in)
		}
		i = i2
	}
	return out
}

func sameInsts(a, b []source.Instance) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ID != b[i].ID || a[i].Name != b[i].Name {
			return false
		}
	}
	return true
}

func (m *meta) parseLabel(d *decoder, v3 bool) {
	t := d.stamp(v3)
	typ := semantics.LabelType(d.u32())
	ident := d.u32()
	nsets := d.count(12, "number of label sets")
	if d.err != nil {
		return
	}
	rec := labelRec{t: t, sets: make([]instLabels, 0, nsets)}
	for i := 0; i < nsets && d.err == nil; i++ {
		inst := d.u32()
		jl := d.i32()
		if d.err == nil && (jl < 0 || jl > 65535) {
			d.pos -= 4
			d.fail("label set JSON length %d out of range", jl)
			return
		}
		setOff := d.pos
		js := d.bytes(int(jl))
		nl := d.i32()
		if d.err != nil {
			return
		}
		if nl > maxLabelsPerSet {
			d.pos -= 4
			d.fail("%d labels in a set (at most %d)", nl, maxLabelsPerSet)
			return
		}
		var idx []semantics.LabelIndex
		if nl > 0 {
			raw := d.bytes(8 * int(nl))
			if d.err != nil {
				return
			}
			idx = make([]semantics.LabelIndex, nl)
			for k := range idx {
				b := raw[8*k:]
				idx[k] = semantics.LabelIndex{
					Name:     uint16(b[0])<<8 | uint16(b[1]),
					NameLen:  b[2],
					Flags:    b[3],
					Value:    uint16(b[4])<<8 | uint16(b[5]),
					ValueLen: uint16(b[6])<<8 | uint16(b[7]),
				}
			}
		}
		ls, err := semantics.LabelSetFromJSONB(js, idx)
		if err != nil {
			d.pos = setOff
			d.fail("%v", err)
			return
		}
		rec.sets = append(rec.sets, instLabels{inst: inst, labels: ls})
	}
	if d.err != nil {
		return
	}
	k := labelKey{typ, ident}
	recs := m.labels[k]
	i := sort.Search(len(recs), func(i int) bool { return recs[i].t.After(t) })
	nr := make([]labelRec, 0, len(recs)+1)
	nr = append(nr, recs[:i]...)
	nr = append(nr, rec)
	nr = append(nr, recs[i:]...)
	m.labels[k] = nr
}

func (m *meta) parseText(d *decoder) {
	tt := d.i32()
	ident := d.u32()
	if d.err != nil {
		return
	}
	rest := d.b[d.pos:]
	if i := bytes.IndexByte(rest, 0); i >= 0 {
		rest = rest[:i]
	}
	if tt&(textOneLine|textHelp) == 0 || tt&(textPMID|textInDom) == 0 {
		return // libpcp skips these silently
	}
	m.texts[textKey{tt, ident}] = string(rest)
}

// help is the long text of an identifier (kind textPMID or textInDom),
// falling back to its one-line text when there is no long text or it is
// empty (libpcp's fallbacktext).
func (m *meta) help(kind int32, ident uint32) string {
	if s := m.texts[textKey{textHelp | kind, ident}]; s != "" {
		return s
	}
	return m.texts[textKey{textOneLine | kind, ident}]
}

// latestLabels returns the label sets of (typ, ident) in force at the end.
func (m *meta) latestLabels(typ semantics.LabelType, ident uint32) []instLabels {
	recs := m.labels[labelKey{typ, ident}]
	if len(recs) == 0 {
		return nil
	}
	return recs[len(recs)-1].sets
}

func (m *meta) firstSet(typ semantics.LabelType, ident uint32) semantics.LabelSet {
	sets := m.latestLabels(typ, ident)
	if len(sets) == 0 {
		return nil
	}
	return sets[0].labels
}

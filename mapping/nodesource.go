package mapping

import (
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// NodeDomain is the PMID and instance domain number of the metrics a
// NodeSource makes (one below derived metrics' 511; no PMDA uses it).
const NodeDomain = 510

// NodeSource is a source with a profile's families added (the node
// profile's, or the hostmetrics profile's: NewHostmetricsSource): each is a
// metric named as node_exporter's family (node_cpu_seconds_total) or the
// receiver's metric (system.cpu.time), of type
// DOUBLE in its base unit, whose instances are its series' label sets
// (named `cpu="0",mode="user"`, with those labels as instance labels). A
// fetch of them fetches their PCP sources and computes them. The PCP
// metrics a family takes its values from are not listed any more; the
// others are the wrapped source's, unchanged. Every output (serve, fetch,
// backfill, OTLP) reads the families through it, so one mapping serves all
// of them.
type NodeSource struct {
	mu  sync.Mutex
	src source.Source
	p   *profile // the table of families (node, hostmetrics)

	innerFirst *source.Metric // identity of the inner metric slice last bound
	innerLen   int
	innerEpoch uint64
	metrics    []source.Metric
	fams       []boundFamily // by nodeFamilies index
	byPMID     map[semantics.PMID]int

	plan  nodePlan
	inner source.Result
	vals  [][]source.InstValue // per family: its values of the last fetch
	lent  *source.Result       // the result whose values are inner's and vals'
	names map[semantics.InDom]*innerNames
	vdoms map[semantics.InDom]*nodeInsts
	// fetches counts the fetches of families, to forget the label sets
	// not seen any more (interfaces and disks that come and go)
	fetches uint64
}

type boundFamily struct {
	present bool
	pmid    semantics.PMID
	indom   semantics.InDom // InDomNull when its series have no labels
	insts   *nodeInsts
	parts   []boundPart
}

type boundPart struct {
	*nodePart
	present   bool
	pmid      semantics.PMID
	indom     semantics.InDom
	scale     float64 // the unit conversion (Unit.Scale)
	joinPMIDs []semantics.PMID
	termPMIDs []semantics.PMID
	termScale []float64 // each term's unit conversion
	termSign  []float64 // sign times the part's factor, after it
	mulByPMID semantics.PMID
	vi, mi    int   // positions in the plan's inner fetch (-1 none)
	ji, ti    []int // of the joins and the terms
	seen      map[int32]*nodeEntry
}

// nodeEntry is the series an inner instance of a part gives, with what
// named it (to notice a renamed instance or a changed join value).
type nodeEntry struct {
	inner string
	joins []string
	vid   int32
}

// nodeInsts are the instances of a family's domain: the label sets seen,
// numbered in order of appearance (never reused); those not seen at the
// last fetch are forgotten once they are half of them.
type nodeInsts struct {
	byKey map[string]int32
	list  []source.Instance
	next  int32
	seen  map[int32]uint64 // the fetch that last gave each
}

type innerNames struct {
	first *source.Instance
	n     int
	byID  map[int32]string
}

// nodePlan is the inner fetch for one list of requested PMIDs.
type nodePlan struct {
	pmids []semantics.PMID // the request it was made for
	want  []semantics.PMID
	pos   []int // per requested PMID: its position in want (-1 for a family)
	fam   []int // per requested PMID: its family (-1 for a wrapped metric)
}

// NewNodeSource wraps src with the node profile's families.
func NewNodeSource(src source.Source) *NodeSource { return newProfileSource(src, nodeProfile) }

// NewHostmetricsSource wraps src with the hostmetrics profile's families
// (hostmetrics.go): the same machinery, another table.
func NewHostmetricsSource(src source.Source) *NodeSource { return newProfileSource(src, hostProfile) }

func newProfileSource(src source.Source, p *profile) *NodeSource {
	w := &NodeSource{src: src, p: p, names: map[semantics.InDom]*innerNames{}, vdoms: map[semantics.InDom]*nodeInsts{}}
	w.refresh()
	return w
}

// Unwrap returns the wrapped source (source.Wrapper).
func (w *NodeSource) Unwrap() source.Source { return w.src }

// Close closes the wrapped source.
func (w *NodeSource) Close() error { return w.src.Close() }

// Metrics returns the wrapped source's metrics without those the families
// take their values from, and the families present, in name order.
func (w *NodeSource) Metrics() []source.Metric {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.refresh()
	return w.metrics
}

// refresh binds the table to the wrapped source's metrics when they
// changed (another slice, or another epoch of the metric set).
func (w *NodeSource) refresh() {
	epoch := source.EpochOf(w.src)
	ms := w.src.Metrics()
	var first *source.Metric
	if len(ms) > 0 {
		first = &ms[0]
	}
	if w.metrics != nil && first == w.innerFirst && len(ms) == w.innerLen && epoch == w.innerEpoch {
		return
	}
	w.innerFirst, w.innerLen, w.innerEpoch = first, len(ms), epoch
	byName := make(map[string]*source.Metric, len(ms))
	for i := range ms {
		if _, dup := byName[ms[i].Name]; !dup {
			byName[ms[i].Name] = &ms[i]
		}
	}
	used := map[string]bool{}
	w.fams = make([]boundFamily, len(w.p.fams))
	w.byPMID = map[semantics.PMID]int{}
	var added []source.Metric
	for fi := range w.p.fams {
		nf := &w.p.fams[fi]
		bf := &w.fams[fi]
		bf.pmid = semantics.NewPMID(NodeDomain, 0, uint32(fi+1))
		bf.indom = semantics.InDomNull
		var ctx semantics.LabelSet
		for pi := range nf.parts {
			p := &nf.parts[pi]
			bp := boundPart{nodePart: p, scale: 1, vi: -1, mi: -1, seen: map[int32]*nodeEntry{}}
			ok := true
			if p.pcp != "" {
				md := byName[p.pcp]
				if md == nil || !numeric(md.Desc.Type) || (p.inst == "" && p.label == "" && md.Desc.InDom != semantics.InDomNull) {
					ok = false
				} else {
					bp.pmid, bp.indom = md.Desc.PMID, md.Desc.InDom
					bp.scale = BaseUnit(md.Desc.Units).Scale
					if ctx == nil {
						ctx = contextLabels(md.Labels)
					}
				}
			}
			for _, j := range p.joins {
				md := byName[j.pcp]
				if md == nil || md.Desc.Type != semantics.TypeString || (md.Desc.InDom != semantics.InDomNull && md.Desc.InDom != bp.indom) {
					ok = false
					break
				}
				bp.joinPMIDs = append(bp.joinPMIDs, md.Desc.PMID)
			}
			for _, tm := range p.terms {
				md := byName[tm.pcp]
				if md == nil || !numeric(md.Desc.Type) || (md.Desc.InDom != semantics.InDomNull && md.Desc.InDom != bp.indom) {
					ok = false
					break
				}
				bp.termPMIDs = append(bp.termPMIDs, md.Desc.PMID)
				f := p.factor // as the part's own value
				if f == 0 {
					f = 1
				}
				bp.termScale = append(bp.termScale, BaseUnit(md.Desc.Units).Scale)
				bp.termSign = append(bp.termSign, tm.sign*f)
			}
			if p.mulBy != "" {
				md := byName[p.mulBy]
				if md == nil || !numeric(md.Desc.Type) || md.Desc.InDom != semantics.InDomNull {
					ok = false
				} else {
					bp.mulByPMID = md.Desc.PMID
				}
			}
			bp.present = ok
			if ok {
				bf.present = true
			}
			bf.parts = append(bf.parts, bp)
		}
		if !bf.present {
			continue
		}
		for _, p := range nf.parts {
			if p.label != "" || len(p.consts) > 0 || len(p.joins) > 0 {
				bf.indom = semantics.NewInDom(NodeDomain, uint32(fi+1))
			}
		}
		if bf.indom != semantics.InDomNull {
			if w.vdoms[bf.indom] == nil { // kept across rebinds: the same ids
				w.vdoms[bf.indom] = &nodeInsts{byKey: map[string]int32{}, seen: map[int32]uint64{}}
			}
			bf.insts = w.vdoms[bf.indom]
		}
		for _, bp := range bf.parts {
			if bp.present && bp.pcp != "" {
				used[bp.pcp] = true
			}
			if bp.present {
				for _, tm := range bp.terms {
					used[tm.pcp] = true
				}
			}
		}
		sem := semantics.SemInstant
		if nf.typ == Counter {
			sem = semantics.SemCounter
		}
		w.byPMID[bf.pmid] = fi
		added = append(added, source.Metric{
			Name:    nf.name,
			Desc:    semantics.Desc{PMID: bf.pmid, Type: semantics.TypeDouble, InDom: bf.indom, Sem: sem},
			OneLine: nf.help,
			Help:    nf.help + " (" + w.p.origin + ", from " + strings.Join(nf.sources(), ", ") + ")",
			Labels:  ctx,
		})
	}
	out := make([]source.Metric, 0, len(ms)+len(added))
	for _, m := range ms {
		if !used[m.Name] {
			out = append(out, m)
		}
	}
	out = append(out, added...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	w.metrics = out
	w.plan = nodePlan{}
}

// sources lists the PCP metrics a family reads.
func (nf *nodeFamily) sources() []string {
	var out []string
	seen := map[string]bool{}
	addName := func(s string) {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, p := range nf.parts {
		addName(p.pcp)
		for _, j := range p.joins {
			addName(j.pcp)
		}
		addName(p.mulBy)
		for _, tm := range p.terms {
			addName(tm.pcp)
		}
		if p.now {
			addName("the fetch's time")
		}
	}
	return out
}

func numeric(t semantics.Type) bool {
	switch t {
	case semantics.Type32, semantics.TypeU32, semantics.Type64, semantics.TypeU64, semantics.TypeFloat, semantics.TypeDouble:
		return true
	}
	return false
}

// contextLabels are the context labels of a label set (the families carry
// them so that target labels stay the same).
func contextLabels(ls semantics.LabelSet) semantics.LabelSet {
	out := semantics.LabelSet{}
	for _, l := range ls {
		if l.Flags&0x3f == semantics.LabelContext {
			out = append(out, l)
		}
	}
	return out
}

// Instances returns the instances of a domain: a family's label sets seen
// so far, or the wrapped source's.
func (w *NodeSource) Instances(indom semantics.InDom) []source.Instance {
	if indom.Domain() != NodeDomain {
		return w.src.Instances(indom)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if d := w.vdoms[indom]; d != nil {
		return d.list
	}
	return nil
}

// InstancesInForce answers as the wrapped source does for its domains
// (source.InDomHistory); a family's domain holds every label set seen.
func (w *NodeSource) InstancesInForce(indom semantics.InDom, t time.Time) ([]source.Instance, time.Time) {
	if indom.Domain() != NodeDomain {
		return source.InstancesInForce(w.src, indom, t)
	}
	return w.Instances(indom), time.Time{}
}

// Fetch fetches pmids at t: the wrapped source's metrics as it returns
// them, the families computed from one fetch of their sources. A family
// whose sources all fail has the first error. The values in res are valid
// until the next Fetch (res holds no slice of its own afterwards).
func (w *NodeSource) Fetch(t time.Time, pmids []semantics.PMID, res *source.Result) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.refresh()
	virtual := false
	for _, p := range pmids {
		if p.Domain() == NodeDomain {
			if _, ok := w.byPMID[p]; ok {
				virtual = true
				break
			}
		}
	}
	if !virtual {
		if w.lent == res { // its slices are ours: the source must not reuse them
			for k := range res.Sets {
				res.Sets[k].Values = nil
			}
			w.lent = nil
		}
		return w.src.Fetch(t, pmids, res)
	}
	w.lent = res
	w.makePlan(pmids)
	w.fetches++
	if err := w.src.Fetch(t, w.plan.want, &w.inner); err != nil {
		return err
	}
	at := w.inner.Time
	if at.IsZero() {
		at = t
	}
	res.Time = w.inner.Time
	if cap(res.Sets) < len(pmids) {
		res.Sets = append(res.Sets[:cap(res.Sets)], make([]source.ValueSet, len(pmids)-cap(res.Sets))...)
	}
	res.Sets = res.Sets[:len(pmids)]
	if len(w.vals) != len(w.fams) {
		w.vals = make([][]source.InstValue, len(w.fams))
	}
	// the values are the inner fetch's and the families' own (no copy),
	// valid until the next Fetch
	for k, p := range pmids {
		out := &res.Sets[k]
		out.PMID, out.Err = p, nil
		if fi := w.plan.fam[k]; fi >= 0 {
			out.Values = w.vals[fi][:0]
			w.compute(fi, at, out)
			w.vals[fi] = out.Values
			w.forget(fi, len(out.Values))
			continue
		}
		in := &w.inner.Sets[w.plan.pos[k]]
		out.Err, out.Values = in.Err, in.Values
	}
	return nil
}

// makePlan lays out the inner fetch of a request (kept while the request
// is the same, as scrapes repeat it).
func (w *NodeSource) makePlan(pmids []semantics.PMID) {
	if len(pmids) == len(w.plan.pmids) && w.plan.want != nil {
		same := true
		for i := range pmids {
			if pmids[i] != w.plan.pmids[i] {
				same = false
				break
			}
		}
		if same {
			return
		}
	}
	pl := nodePlan{pmids: append([]semantics.PMID(nil), pmids...)}
	at := map[semantics.PMID]int{}
	need := func(p semantics.PMID) int {
		if i, ok := at[p]; ok {
			return i
		}
		at[p] = len(pl.want)
		pl.want = append(pl.want, p)
		return at[p]
	}
	for _, p := range pmids {
		fi, ok := w.byPMID[p]
		if !ok {
			pl.pos = append(pl.pos, need(p))
			pl.fam = append(pl.fam, -1)
			continue
		}
		pl.pos = append(pl.pos, -1)
		pl.fam = append(pl.fam, fi)
		for pi := range w.fams[fi].parts {
			bp := &w.fams[fi].parts[pi]
			bp.vi, bp.mi, bp.ji, bp.ti = -1, -1, bp.ji[:0], bp.ti[:0]
			if !bp.present {
				continue
			}
			if bp.pcp != "" {
				bp.vi = need(bp.pmid)
			}
			if bp.nodePart.mulBy != "" {
				bp.mi = need(bp.mulByPMID)
			}
			for _, j := range bp.joinPMIDs {
				bp.ji = append(bp.ji, need(j))
			}
			for _, j := range bp.termPMIDs {
				bp.ti = append(bp.ti, need(j))
			}
		}
	}
	w.plan = pl
}

// compute fills out with family fi's values from the inner fetch.
func (w *NodeSource) compute(fi int, at time.Time, out *source.ValueSet) {
	bf := &w.fams[fi]
	var firstErr error
	for pi := range bf.parts {
		bp := &bf.parts[pi]
		if !bp.present {
			continue
		}
		if !w.joinsOK(bp, &firstErr) {
			continue
		}
		mulBy := 1.0
		if bp.mi >= 0 {
			s := &w.inner.Sets[bp.mi]
			if s.Err != nil || len(s.Values) == 0 {
				if firstErr == nil {
					firstErr = s.Err
				}
				continue
			}
			mulBy = s.Values[0].Value.Float64()
		}
		switch {
		case bp.one || bp.now:
			x := 1.0
			if bp.now {
				x = float64(at.UnixNano()) / 1e9
			}
			inst := semantics.InNull
			if bf.indom != semantics.InDomNull {
				inst = w.series(fi, bp, semantics.InNull, "")
			}
			out.Values = append(out.Values, source.InstValue{Inst: inst, Value: semantics.DoubleValue(x)})
			continue
		}
		s := &w.inner.Sets[bp.vi]
		if s.Err != nil {
			if firstErr == nil {
				firstErr = s.Err
			}
			continue
		}
		var names *innerNames
		if bp.indom != semantics.InDomNull {
			names = w.innerNames(bp.indom, at)
		}
		for vi := range s.Values {
			iv := &s.Values[vi]
			name := ""
			if names != nil {
				name = names.name(iv.Inst)
				if bp.inst != "" && name != bp.inst {
					continue
				}
			}
			x := bp.value(iv.Value) * mulBy
			if len(bp.ti) > 0 {
				var ok bool
				if x, ok = w.addTerms(bp, iv.Inst, x, &firstErr); !ok {
					continue
				}
			}
			inst := semantics.InNull
			if bf.indom != semantics.InDomNull {
				inst = w.series(fi, bp, iv.Inst, name)
				if inst < 0 {
					continue // a join has no value for this instance
				}
			}
			out.Values = append(out.Values, source.InstValue{Inst: inst, Value: semantics.DoubleValue(x)})
		}
	}
	if len(out.Values) == 0 && firstErr != nil {
		out.Err = firstErr
	}
}

// joinsOK reports whether a part's joins were fetched.
func (w *NodeSource) joinsOK(bp *boundPart, firstErr *error) bool {
	for _, ji := range bp.ji {
		s := &w.inner.Sets[ji]
		if s.Err != nil {
			if *firstErr == nil {
				*firstErr = s.Err
			}
			return false
		}
	}
	return true
}

// value converts one PCP value to the family's unit.
func (bp *boundPart) value(v semantics.Value) float64 {
	var x float64
	if bp.round32 && v.Type() == semantics.TypeFloat {
		x, _ = strconv.ParseFloat(strconv.FormatFloat(float64(v.Float32()), 'g', -1, 32), 64)
	} else {
		x = v.Float64()
	}
	x = convert(x, bp.scale)
	if bp.factor != 0 {
		x *= bp.factor
	}
	return x
}

// addTerms adds a part's terms for an inner instance to x (their values
// for the same instance, or their only value when singular); ok false when
// one has none.
func (w *NodeSource) addTerms(bp *boundPart, inst int32, x float64, firstErr *error) (float64, bool) {
	for k, ti := range bp.ti {
		s := &w.inner.Sets[ti]
		if s.Err != nil {
			if *firstErr == nil {
				*firstErr = s.Err
			}
			return 0, false
		}
		found := false
		for i := range s.Values {
			if s.Values[i].Inst == inst || s.Values[i].Inst == semantics.InNull {
				x += convert(s.Values[i].Value.Float64(), bp.termScale[k]) * bp.termSign[k]
				found = true
				break
			}
		}
		if !found {
			return 0, false
		}
	}
	return x, true
}

// joinValue is a join's value for an inner instance (the only value of a
// singular join); ok false when it has none.
func (w *NodeSource) joinValue(ji int, inst int32) ([]byte, bool) {
	s := &w.inner.Sets[ji]
	for i := range s.Values {
		if s.Values[i].Inst == inst || s.Values[i].Inst == semantics.InNull {
			return s.Values[i].Value.Bytes(), true
		}
	}
	return nil, false
}

// series returns the family instance of an inner instance of a part
// (named name), creating it when its labels are new; -1 when a join has no
// value for it.
func (w *NodeSource) series(fi int, bp *boundPart, inst int32, name string) int32 {
	d := w.fams[fi].insts
	e := bp.seen[inst]
	if e != nil && e.inner == name {
		same := true
		for k, ji := range bp.ji {
			b, ok := w.joinValue(ji, inst)
			if !ok || string(b) != e.joins[k] {
				same = false
				break
			}
		}
		if same {
			d.seen[e.vid] = w.fetches
			return e.vid
		}
	}
	joins := make([]string, len(bp.ji))
	for k, ji := range bp.ji {
		b, ok := w.joinValue(ji, inst)
		if !ok {
			return -1
		}
		joins[k] = validUTF8(string(b))
	}
	var ls labelSet
	if bp.label != "" {
		ls.set(bp.label, validUTF8(strings.TrimPrefix(name, bp.trim)))
	}
	for _, c := range bp.consts {
		ls.set(c.Name, c.Value)
	}
	for k, j := range bp.joins {
		ls.set(j.label, joins[k])
	}
	pairs := ls.sorted()
	var key strings.Builder
	labels := make(semantics.LabelSet, 0, len(pairs))
	for i, p := range pairs {
		if i > 0 {
			key.WriteByte(',')
		}
		key.WriteString(p.Name + "=" + strconv.Quote(p.Value))
		v, _ := json.Marshal(p.Value)
		labels = append(labels, semantics.Label{Name: p.Name, Value: string(v), Flags: semantics.LabelInstances})
	}
	vid, ok := d.byKey[key.String()]
	if !ok {
		vid = d.next
		if vid == math.MaxInt32 {
			return -1
		}
		d.next++
		d.byKey[key.String()] = vid
		// a new slice: Instances' callers may hold the old one
		list := make([]source.Instance, len(d.list), len(d.list)+1)
		copy(list, d.list)
		d.list = append(list, source.Instance{ID: vid, Name: key.String(), Labels: labels})
	}
	bp.seen[inst] = &nodeEntry{inner: name, joins: joins, vid: vid}
	d.seen[vid] = w.fetches
	return vid
}

// forget drops the label sets of family fi that the last fetch did not
// give, once they outnumber the live ones (live of them) and 64: the
// instances of a host whose interfaces or disks come and go stay bounded.
func (w *NodeSource) forget(fi, live int) {
	bf := &w.fams[fi]
	d := bf.insts
	if d == nil || len(d.list) <= 64 || len(d.list) <= 2*live {
		return
	}
	list := make([]source.Instance, 0, live)
	for _, in := range d.list {
		if d.seen[in.ID] == w.fetches {
			list = append(list, in)
			continue
		}
		delete(d.byKey, in.Name)
		delete(d.seen, in.ID)
	}
	d.list = list
	for pi := range bf.parts {
		for k, e := range bf.parts[pi].seen {
			if _, ok := d.seen[e.vid]; !ok {
				delete(bf.parts[pi].seen, k)
			}
		}
	}
}

// innerNames are the wrapped source's instances of a domain in force at t
// (indexed again only when they change).
func (w *NodeSource) innerNames(indom semantics.InDom, t time.Time) *innerNames {
	ins, _ := source.InstancesInForce(w.src, indom, t)
	n := w.names[indom]
	var first *source.Instance
	if len(ins) > 0 {
		first = &ins[0]
	}
	if n == nil || n.first != first || n.n != len(ins) {
		n = &innerNames{first: first, n: len(ins), byID: make(map[int32]string, len(ins))}
		for i := range ins {
			n.byID[ins[i].ID] = ins[i].Name
		}
		w.names[indom] = n
	}
	return n
}

// name names an instance (its id when unknown, as the bridge does).
func (n *innerNames) name(id int32) string {
	if s, ok := n.byID[id]; ok {
		return s
	}
	return strconv.Itoa(int(id))
}

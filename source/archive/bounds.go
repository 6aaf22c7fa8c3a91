package archive

import (
	"slices"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

// bounds is the state of the bounds search (libpcp's pmidcntl_t and
// instcntl_t of a context): each metric asked so far, its instances and
// their bounds, and how a record read changes them (update, libpcp's
// update_bounds).
type bounds struct {
	// corrupt: a record read for this fetch holds a value set of a metric
	// asked whose encoding contradicts its type (ErrEncoding) or its
	// earlier values' encoding
	corrupt bool

	pms map[semantics.PMID]*pmState
	// caliper's answers since the last reset, per instance domain
	calipers map[semantics.InDom]map[int32][2]float64
	// hashWalkOrder's answers since the last reset, per instance domain
	orders map[semantics.InDom][]int32
	want   []*icp
	ending []*icp // searchForward's scratch
	// the metrics of the last Fetch and their states (see pmsOf)
	lastPMIDs []semantics.PMID
	lastPMs   []*pmState
	pmList    []*pmState // the states of pms that are not nil
	setHint   []setHint  // the metric at each set position of the last record
	// value sets update skipped as superseded (see update), for tests
	superseded int
}

// pmState is the state of one metric followed: its instances' bounds.
type pmState struct {
	desc       semantics.Desc
	icps       []*icp // candidate instances, in instance id order
	order      []*icp // the same in the order of libpcp's results (hashWalkOrder)
	byInst     map[int32]*icp
	hint       []*icp // the instance at each position of the last record
	lastNumval int
	numval     int
	typeErr    bool
	// valfmt is the encoding of the first values of the metric a record
	// read showed (-1: none yet); libpcp's update_bounds refuses a record
	// whose values of the metric come in another one (PM_ERR_LOGREC). It
	// outlives a reset, as libpcp's pmidcntl_t outlives pmSetMode.
	valfmt int8
}

// icp is libpcp's instcntl_t: the interpolation bounds of one instance.
// Times are seconds from the start, -1 when unset.
type icp struct {
	// what every fetch reads of every wanted instance first, in one cache
	// line (its passes, supplies, answer), then the bounds: the update of
	// a numeric prior touches nothing else
	inst     int32
	inresult bool
	search   bool
	scPrior  bool // SCANNED: no need to search back again
	scNext   bool
	gen      uint32 // supplies' mark
	// time_caliper: with caliper set, the instance is in the result only
	// from birth to death
	caliper bool
	tFirst  float64
	tLast   float64
	// the bounds, as semantics.Interpolate takes them
	prior        semantics.Bound
	next         semantics.Bound
	birth, death float64
	bPrior       []byte
	bNext        []byte
}

// setHint caches the metric at one value set position of the last record:
// its PMID and state (nil when not replayed); ok once filled.
type setHint struct {
	pmid semantics.PMID
	pm   *pmState
	ok   bool
}

// encodingChanged reports whether set, a set of values of pm's metric read
// from a record, holds them in another encoding than the metric's first
// values did (and remembers the encoding of the first).
func (pm *pmState) encodingChanged(set *source.ValueSet) bool {
	if len(set.Values) == 0 {
		return false
	}
	if pm.valfmt < 0 {
		pm.valfmt = int8(set.ValFmt)
		return false
	}
	return pm.valfmt != int8(set.ValFmt)
}

// pmMaker makes the state of a metric from the archives' metadata
// (Replay.newPM).
type pmMaker interface {
	newPM(semantics.PMID) *pmState
}

// add makes the states of the metrics of pmids not asked before (nil for
// those not in the archives), and reports whether there were any.
func (b *bounds) add(pmids []semantics.PMID, mk pmMaker) bool {
	added := false
	for _, p := range pmids {
		if _, ok := b.pms[p]; !ok {
			b.pms[p] = mk.newPM(p)
			added = true
		}
	}
	return added
}

// reset forgets every bound: each metric's state is made anew (the
// metadata may have grown), keeping the encoding of its first values.
func (b *bounds) reset(mk pmMaker) {
	b.calipers = map[semantics.InDom]map[int32][2]float64{}
	b.orders = map[semantics.InDom][]int32{}
	for p, old := range b.pms {
		pm := mk.newPM(p)
		if pm != nil && old != nil {
			pm.valfmt = old.valfmt
		}
		b.pms[p] = pm
	}
	b.lastPMIDs = b.lastPMIDs[:0] // their states are new
}

// pmsOf returns the state of each metric of pmids (nil: not in the
// archives), from the last call's answer when asked for the same metrics
// again with none added since.
func (b *bounds) pmsOf(pmids []semantics.PMID, added bool) []*pmState {
	if !added && slices.Equal(pmids, b.lastPMIDs) {
		return b.lastPMs
	}
	b.lastPMIDs = append(b.lastPMIDs[:0], pmids...)
	b.lastPMs = b.lastPMs[:0]
	for _, p := range pmids {
		b.lastPMs = append(b.lastPMs, b.pms[p])
	}
	return b.lastPMs
}

// changed follows a change of b.pms: the list of states is made anew
// and the hints of update forgotten.
func (b *bounds) changed() {
	b.pmList = b.pmList[:0]
	for _, pm := range b.pms {
		if pm != nil {
			b.pmList = append(b.pmList, pm)
		}
	}
	b.setHint = b.setHint[:0]
}

// pmAt returns the state of p, the metric at set position i of a record,
// through hints: records list their metrics in the same order time after
// time, so the metric at each position is remembered before asking the
// map.
func (b *bounds) pmAt(hints *[]setHint, i int, p semantics.PMID) *pmState {
	if i >= len(*hints) {
		*hints = append(*hints, make([]setHint, i+1-len(*hints))...)
	}
	h := &(*hints)[i]
	if !h.ok || h.pmid != p {
		*h = setHint{pmid: p, pm: b.pms[p], ok: true}
	}
	return h.pm
}

// follows reports whether the replay follows a metric (the readers skip
// the value sets of the others undecoded).
func (b *bounds) follows(p semantics.PMID) bool { return b.pms[p] != nil }

// followed is follows as of now, for the prefetching reader's goroutine
// (the metrics followed change only with a reset, which starts a new feed).
func (b *bounds) followed() func(semantics.PMID) bool {
	set := make(map[semantics.PMID]bool, len(b.pms))
	for p, pm := range b.pms {
		if pm != nil {
			set[p] = true
		}
	}
	return func(p semantics.PMID) bool { return set[p] }
}

// keepIf returns the metrics followed of which some instance satisfies
// keep, as a set for a reader's Only.
func (b *bounds) keepIf(keep func(*icp) bool) func(semantics.PMID) bool {
	set := make(map[semantics.PMID]bool, len(b.pms))
	for p, pm := range b.pms {
		if pm == nil {
			continue
		}
		for _, c := range pm.icps {
			if keep(c) {
				set[p] = true
				break
			}
		}
	}
	return func(p semantics.PMID) bool { return set[p] }
}

// forget unsets every bound (and search flag) of every metric, and every
// hint: a positioning starts over.
func (b *bounds) forget() {
	b.setHint = b.setHint[:0]
	for _, pm := range b.pms {
		if pm == nil {
			continue
		}
		clear(pm.hint)
		for _, c := range pm.icps {
			c.prior.T, c.prior.Kind, c.scPrior, c.prior.V = -1, semantics.BoundUndefined, false, semantics.Value{}
			c.next.T, c.next.Kind, c.scNext, c.next.V = -1, semantics.BoundUndefined, false, semantics.Value{}
			c.search = false
		}
	}
}

// grown forgets what fetches learnt at the end of the timeline: the time
// after which an instance has no values (libpcp's t_last), set when a
// search forward for its upper bound reached the last record. Records were
// added since (a followed archive), so a search must look at them: libpcp,
// made for finished archives, would keep answering no value up to the
// next record read.
func (b *bounds) grown() {
	for _, pm := range b.pms {
		for _, c := range pm.icps {
			if c.tLast >= 0 {
				c.tLast, c.scNext = -1, false
			}
		}
	}
}

// wanted lists in b.want the instances of pms in the result at tReq (their
// search flags cleared), and counts them per metric.
func (b *bounds) wanted(pms []*pmState, tReq float64) {
	b.want = b.want[:0]
	for _, pm := range pms {
		if pm == nil {
			continue
		}
		pm.numval, pm.typeErr = 0, false
		for _, c := range pm.icps {
			c.search = false
			c.inresult = true
			if c.caliper && (tReq < c.birth || tReq > c.death) {
				c.inresult = false
				continue
			}
			pm.numval++
			b.want = append(b.want, c)
		}
	}
}

// lackingPrior sets the search flag of the instances wanted that have no
// lower bound, and returns them.
func (b *bounds) lackingPrior() []*icp {
	var missing []*icp
	for _, c := range b.want {
		if c.prior.Kind == semantics.BoundUndefined {
			c.search = true
			missing = append(missing, c)
		}
	}
	return missing
}

// stillLacking returns the instances of missing that still have no lower
// bound (in missing's array), and ends the search of the others.
func stillLacking(missing []*icp) []*icp {
	k := 0
	for _, c := range missing {
		if c.prior.Kind == semantics.BoundUndefined {
			missing[k] = c
			k++
		} else {
			c.search = false
		}
	}
	return missing[:k]
}

// scanned marks the instances wanted whose lower bound lacks (their search
// flag set) as scanned back from tReq: everything before the read position
// has been applied to the bounds already, so a backward search finds
// nothing new, as libpcp's finds nothing once it reaches the start.
func (b *bounds) scanned(tReq float64) {
	for _, c := range b.want {
		if !c.search {
			continue
		}
		if c.prior.Kind != semantics.BoundUndefined && c.prior.T <= tReq {
			c.scPrior = true
		} else if c.tFirst < tReq {
			c.tFirst = tReq
			c.scPrior = true
		}
		c.search = false
	}
}

// unbounded sets the search flag of the instances wanted at tReq that
// lack an upper bound, and returns how many.
func (b *bounds) unbounded(tReq float64) int {
	forw := 0
	for _, c := range b.want {
		if c.tLast >= 0 && tReq > c.tLast {
			continue
		}
		if (c.next.Kind == semantics.BoundUndefined && !c.scNext) ||
			c.next.T < tReq ||
			(c.prior.Kind == semantics.BoundMark && c.next.T == tReq) {
			forw++
			c.search = true
		}
	}
	return forw
}

// searched ends a search forward at tReq: an instance still searching, or
// whose upper bound is before tReq, has no value after tReq (its tLast),
// as libpcp's search that reaches the end concludes.
func (b *bounds) searched(tReq float64) {
	for _, c := range b.want {
		if !c.search && !(c.next.T < tReq) {
			continue
		}
		if c.search && c.next.T < tReq && (c.tLast < 0 || tReq < c.tLast) {
			c.tLast = tReq
			c.scNext = true
		}
		c.search = false
	}
}

// update is libpcp's update_bounds for one record at tThis, rolling or
// searching forwards (searching: a search for upper bounds is under way;
// the instances that get one stop searching). It returns how many did,
// and whether the record is a <mark> that set a lower bound.
//
// Moving the position (roll, or searchForward at the position), next holds
// the sets of the record applied right after this one (see window.successor;
// tThis < tReq, tThis <= tNext <= tReq, not a mark): a set
// of this record whose metric and instances all come again in next is
// skipped, as next leaves every such instance c as it would after both:
//   - c.prior.T in (tThis, tReq]: this record changes nothing;
//   - c.prior.T <= tThis: this record sets the lower bound, next overwrites
//     it, and neither touches the upper one (c.prior.T < tReq);
//   - c.prior.T > tReq: this record moves it to the upper bound if earlier
//     than that one and sets tThis; next, from the state before, makes the
//     same move and sets tNext; from the state after, it only sets tNext.
//
// In each case next's own upper-bound step (when tNext == tReq) then sees
// the same state.
func (b *bounds) update(w *winRec, tReq float64, searching bool, next []source.ValueSet) (ended int, sawMark bool) {
	if w.mark {
		return b.mark(w.t, tReq, searching)
	}
	for i := range w.sets {
		set := &w.sets[i]
		pm := b.pmAt(&b.setHint, i, set.PMID)
		if pm == nil || !b.sound(pm, set) {
			continue
		}
		if i < len(next) && next[i].PMID == set.PMID && next[i].Err == nil && sameInstances(next[i].Values, set.Values) {
			b.superseded++
			continue
		}
		ended += pm.apply(set.Values, w.t, tReq, searching)
	}
	return ended, false
}

// sound reports whether a value set of pm's metric read from a record can
// be applied: no error, and values encoded as its type and its first
// values are. A set contradicting them makes the fetch fail (b.corrupt:
// libpcp's update_bounds returns PM_ERR_LOGREC).
func (b *bounds) sound(pm *pmState, set *source.ValueSet) bool {
	if set.Err != nil {
		if set.Err == pcplog.ErrEncoding {
			b.corrupt = true
		}
		return false
	}
	if pm.encodingChanged(set) { // update_bounds: "valfmt changed"
		b.corrupt = true
		return false
	}
	return true
}

// mark is update for a <mark> record at tThis: it bounds every wanted
// instance it is nearer tReq than.
func (b *bounds) mark(tThis, tReq float64, searching bool) (ended int, sawMark bool) {
	for _, c := range b.want {
		if tThis <= tReq && (tThis >= c.prior.T || c.prior.T > tReq) {
			c.prior.T, c.prior.Kind, c.scPrior = tThis, semantics.BoundMark, false
			sawMark = true
		}
		if tThis >= tReq && (tThis <= c.next.T || c.next.T < 0 || c.next.T < tReq) {
			c.next.T, c.next.Kind, c.scNext = tThis, semantics.BoundMark, false
			if c.search && searching {
				c.search = false
				ended++
				c.scNext = true
			}
		}
	}
	return ended, sawMark
}

// apply is update for the values of pm's metric in a record at tThis: each
// in the result becomes a lower bound if at or before tReq and nearer it
// than the one it has, an upper bound if at or after tReq and nearer it.
// It returns how many searching instances got an upper bound (searching).
func (pm *pmState) apply(vals []source.InstValue, tThis, tReq float64, searching bool) (ended int) {
	if len(pm.hint) < len(vals) {
		pm.hint = append(pm.hint, make([]*icp, len(vals)-len(pm.hint))...)
	}
	for j := range vals {
		iv := &vals[j]
		// records list instances in the same order time after time:
		// remember where each was, before asking the map
		c := pm.hint[j]
		if c == nil || c.inst != iv.Inst {
			c = pm.byInst[iv.Inst]
			pm.hint[j] = c
		}
		if c == nil {
			if len(pm.icps) == 1 && pm.icps[0].inst == semantics.InNull {
				c = pm.icps[0]
			} else {
				continue
			}
		}
		if !c.inresult {
			continue
		}
		if tThis <= tReq && (c.prior.T > tReq || tThis >= c.prior.T) {
			if c.prior.T < c.next.T && c.prior.T >= tReq {
				c.next.T, c.next.Kind, c.scNext = c.prior.T, c.prior.Kind, false
				setValue(&c.next.V, c.prior.V, &c.bNext)
			}
			c.prior.T, c.prior.Kind = tThis, semantics.BoundValue
			setValue(&c.prior.V, iv.Value, &c.bPrior)
		}
		if tThis >= tReq && (c.next.T < tReq || tThis <= c.next.T) {
			if c.prior.T < c.next.T && c.next.T <= tReq {
				c.prior.T, c.prior.Kind, c.scPrior = c.next.T, c.next.Kind, false
				setValue(&c.prior.V, c.next.V, &c.bPrior)
			}
			c.next.T, c.next.Kind = tThis, semantics.BoundValue
			setValue(&c.next.V, iv.Value, &c.bNext)
			if searching && c.search {
				c.search = false
				ended++
				c.scNext = true
			}
		}
	}
	return ended
}

// applyPrior is update for a record before tReq, restricted to the
// instances whose search flag is set (missing lists them).
func (b *bounds) applyPrior(rec *pcplog.Record, tThis float64, missing []*icp) {
	if rec.Mark {
		for _, c := range missing {
			if tThis >= c.prior.T {
				c.prior.T, c.prior.Kind, c.scPrior = tThis, semantics.BoundMark, false
			}
		}
		return
	}
	for i := range rec.Sets {
		set := &rec.Sets[i]
		pm := b.pms[set.PMID]
		if pm == nil || !b.sound(pm, set) {
			continue
		}
		for j := range set.Values {
			iv := &set.Values[j]
			c := pm.byInst[iv.Inst]
			if c == nil && len(pm.icps) == 1 && pm.icps[0].inst == semantics.InNull {
				c = pm.icps[0]
			}
			if c == nil || !c.search || !c.inresult {
				continue
			}
			if tThis >= c.prior.T {
				c.prior.T, c.prior.Kind = tThis, semantics.BoundValue
				setValue(&c.prior.V, iv.Value, &c.bPrior)
			}
		}
	}
}

// setValue copies v into *dst, a byte payload into *buf (reused); a
// numeric value leaves *buf alone (it is in another cache line).
func setValue(dst *semantics.Value, v semantics.Value, buf *[]byte) {
	if t := v.Type(); t.IsNumeric() {
		dst.SetNumeric(t, v.Bits())
		return
	}
	*buf = append((*buf)[:0], v.Bytes()...)
	dst.SetBytes(v.Type(), *buf)
}

// sameInstances reports whether two value sets list the same instances in
// the same order.
func sameInstances(a, b []source.InstValue) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Inst != b[i].Inst {
			return false
		}
	}
	return true
}

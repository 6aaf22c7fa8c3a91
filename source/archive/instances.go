package archive

import (
	"math"
	"sort"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

// newPM returns the state of metric p with no bounds yet (nil: not in the
// archives): its instances, their lifetimes (caliper) and libpcp's order.
func (r *Replay) newPM(p semantics.PMID) *pmState {
	d, ok := r.descs[p]
	if !ok {
		return nil
	}
	if d.InDom == semantics.InDomNull {
		return newPMState(d, []int32{semantics.InNull}, nil)
	}
	insts := r.instanceIDs(d.InDom)
	cal, ok := r.calipers[d.InDom]
	if !ok {
		cal = r.caliper(d.InDom)
		r.calipers[d.InDom] = cal
	}
	pm := newPMState(d, insts, cal)
	ids, ok := r.orders[d.InDom]
	if !ok || len(ids) != len(insts) { // (the metadata grew since)
		list := insts
		if len(r.archives) == 1 {
			list = r.archives[0].InDomArchiveOrder(d.InDom)
		}
		ids = hashWalkOrder(list)
		r.orders[d.InDom] = ids
	}
	pm.order = make([]*icp, 0, len(ids))
	for _, inst := range ids {
		pm.order = append(pm.order, pm.byInst[inst])
	}
	return pm
}

// newPMState returns the state of a metric of descriptor d whose
// instances are insts, with their birth and death times from cal, in
// instance order.
func newPMState(d semantics.Desc, insts []int32, cal map[int32][2]float64) *pmState {
	pm := &pmState{desc: d, lastNumval: -1, valfmt: -1}
	// one block per metric: the bounds of a record's instances are updated
	// together, record after record
	store := make([]icp, len(insts))
	pm.icps = make([]*icp, len(insts))
	pm.byInst = make(map[int32]*icp, len(insts))
	for i, inst := range insts {
		c := &store[i]
		*c = icp{inst: inst, prior: semantics.Bound{T: -1}, next: semantics.Bound{T: -1}, tFirst: -1, tLast: -1}
		if b, ok := cal[inst]; ok {
			c.caliper, c.birth, c.death = true, b[0], b[1]
		}
		pm.icps[i] = c
		pm.byInst[inst] = c
	}
	pm.order = pm.icps
	return pm
}

// hashWalkOrder returns ids in the order libpcp's interpolated results list
// them: the walk of its per-metric instance hash table (interp.c, hash.c),
// preallocated with as many buckets as ids, each id added in list order at
// the head of bucket id % len(ids), walked bucket 0 upward and each chain
// from its head. (With as many buckets as ids, the table never grows.)
func hashWalkOrder(list []int32) []int32 {
	n := uint32(len(list))
	// a counting sort by bucket, each bucket filled from its end: the
	// chains' head-first order
	end := make([]int32, n+1)
	for _, id := range list {
		end[uint32(id)%n+1]++
	}
	for k := uint32(1); k <= n; k++ {
		end[k] += end[k-1]
	}
	out := make([]int32, n)
	for _, id := range list {
		k := uint32(id)%n + 1
		end[k]--
		out[end[k]] = id
	}
	return out
}

// hashThreshold is libpcp's HASH_THRESHOLD: instance domains that ever hold
// this many instances get birth and death times (time_caliper).
const hashThreshold = 16

// caliper gives each instance of a domain that ever holds hashThreshold
// instances its birth and death times (libpcp's time_caliper), or nil.
// Birth is the time of the first indom record holding an instance, death
// the time of the record after the last one holding it (+Inf if that is
// the last record). The records are taken in time order as changes to the
// set of instances: a delta on the record before it by its changes alone,
// so that the cost is that of the .meta records, not records x instances.
func (r *Replay) caliper(indom semantics.InDom) map[int32][2]float64 {
	var snaps []pcplog.InDomRecord
	for _, a := range r.archives {
		snaps = a.AppendInDomRecords(snaps, indom)
	}
	sort.SliceStable(snaps, func(i, j int) bool { return r.secs(snaps[i].Time) < r.secs(snaps[j].Time) })
	out := map[int32][2]float64{}
	l := lifetimes{out: out, cur: map[int32]bool{}} // (cur stays on the stack)
	big := false
	var prev pcplog.InDomRecord
	for _, s := range snaps {
		t := r.secs(s.Time)
		if !s.Changes(prev, func(id int32, gone bool) { l.change(id, gone, t) }) {
			l.become(s, t)
		}
		prev = s
		if len(l.cur) >= hashThreshold {
			big = true
		}
	}
	if !big {
		return nil
	}
	return out
}

// lifetimes is caliper's state: each instance's birth and death (out),
// and the instances present (cur).
type lifetimes struct {
	out map[int32][2]float64
	cur map[int32]bool
}

// change applies one change of an indom record at t: id gone, or there.
func (l lifetimes) change(id int32, gone bool, t float64) {
	switch {
	case gone && l.cur[id]:
		l.remove(id, t)
	case !gone && !l.cur[id]:
		l.add(id, t)
	}
}

// become applies an indom record at t listing every instance present.
func (l lifetimes) become(s pcplog.InDomRecord, t float64) {
	next := map[int32]bool{}
	for _, in := range s.Instances() {
		next[in.ID] = true
	}
	for id := range l.cur {
		if !next[id] {
			l.remove(id, t)
		}
	}
	for id := range next {
		if !l.cur[id] {
			l.add(id, t)
		}
	}
}

func (l lifetimes) add(id int32, t float64) {
	l.cur[id] = true
	c, ok := l.out[id]
	if !ok {
		c[0] = t
	}
	c[1] = math.Inf(1)
	l.out[id] = c
}

func (l lifetimes) remove(id int32, t float64) {
	delete(l.cur, id)
	c := l.out[id]
	c[1] = t
	l.out[id] = c
}

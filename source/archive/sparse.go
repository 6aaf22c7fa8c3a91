package archive

import (
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

// pacing is the state of sparse reading (see pace): the records this
// fetch moved the position over (passed over included), the fetches since
// the positioning, the records passed over and the runs refused (and their
// counts as of the previous fetch), the fetches sparse reading waits for
// after refused runs.
type pacing struct {
	moved                       int
	fetches                     int
	passed, refused             int
	passedBefore, refusedBefore int
	backoff, sparseWait         int
	gen                         uint32 // supplies' mark
	// the metric at each set position of the last record supplies saw
	supHint []setHint
	// the last record applied at the position (its time, a mark), and
	// whether it held every instance in the result (see lastSupplied)
	lastPos     float64
	lastPosMark bool
	wouldPass   bool
}

// pace chooses the reading for this fetch from the previous one (the first
// fetch's positioning tells nothing of the pace): sparse when it moved the
// position over sparseRun records or more and the last of them held every
// instance in the result (see lastSupplied), dense when it moved over one
// at most, or when it read sparsely and its runs were refused and none
// accepted (reading sparsely then reads every record, without the
// goroutine). After such a fetch, sparse reading waits for a number of
// fetches, doubled at each refusal up to 64, reset by a run accepted. It
// reports whether it switched f between dense and sparse reading.
func (p *pacing) pace(f *feed) (switched bool) {
	moved, passed, refused := p.moved, p.passed-p.passedBefore, p.refused-p.refusedBefore
	p.moved, p.passedBefore, p.refusedBefore = 0, p.passed, p.refused
	p.fetches++
	if p.sparseWait > 0 {
		p.sparseWait--
	}
	switch {
	case p.fetches < 2:
	case f.sparse && f.delivered && !f.plainAt(f.lastAi, f.lastVol):
		return f.goDense() // a compressed volume: nothing to pass over
	case f.sparse && refused > 0 && passed == 0:
		p.backoff = min(max(2*p.backoff, 4), 64)
		p.sparseWait = p.backoff
		return f.goDense()
	case f.sparse && passed > 0:
		p.backoff = 0
	case moved >= sparseRun && p.wouldPass && p.sparseWait == 0:
		return f.goSparse()
	case moved <= 1:
		return f.goDense()
	}
	return false
}

// movedOver counts w, applied at the position, which moved past it.
func (p *pacing) movedOver(w *winRec) {
	p.moved++
	p.lastPos, p.lastPosMark = w.t, w.mark
}

// passedOver counts a run sparse reading passed over at the position.
func (p *pacing) passedOver(ran run) {
	if ran.res == pcplog.RunRefused {
		p.refused++
	}
	p.passed += ran.n
	p.moved += ran.n
}

// switched counts a switch between dense and sparse reading (tests).
func (r *Replay) switched() {
	if r.test != nil {
		r.test.switches++
	}
}

// observe notes after a fetch that read densely (from f) whether sparse
// reading would have passed over the records it moved the position over,
// when they are enough to read sparsely (see pace).
func (p *pacing) observe(f *feed, pms []*pmState) {
	if !f.sparse && p.moved >= sparseRun {
		p.wouldPass = p.lastSupplied(pms)
	}
}

// reset forgets the pace: the next fetch is a first one.
func (p *pacing) reset() {
	p.moved, p.fetches, p.backoff, p.sparseWait = 0, 0, 0, 0
	p.passedBefore, p.refusedBefore = p.passed, p.refused
}

// lastSupplied reports whether every instance in the result (of pms, the
// bounds' states) has its lower
// bound from the last record this fetch applied at the position: sparse
// reading would then have passed over the records before it (see
// supplies), as it will at this pace.
func (p *pacing) lastSupplied(pms []*pmState) bool {
	if p.lastPosMark {
		return false
	}
	for _, pm := range pms {
		for _, c := range pm.icps {
			if c.inresult && (c.prior.Kind != semantics.BoundValue || c.prior.T != p.lastPos) {
				return false
			}
		}
	}
	return true
}

// sparseRun is the number of records a fetch must move the position over
// for the following fetches to read sparsely (see front): then most
// records are passed over unread, and reading them one by one, without the
// prefetching goroutine, costs less than decoding them all ahead.
const sparseRun = 4

// supplies reports whether rec, the last record of a run of records at the
// position that are values, at or before tReq (only rec may be at tReq) and
// in time order, holds a value (no error) of every instance in the result
// of every followed metric (of b): the instances bounds.update changes. Applying
// rec alone then leaves every bound as applying the whole run does, as for
// the superseded sets of a successor (see bounds.update), the argument
// holding for any number of records between: each instance's lower bound
// is rec's, set from the same state, and no record of the run touches an
// upper bound (they are before tReq; at tReq, rec alone).
func (p *pacing) supplies(b *bounds, rec *pcplog.Record) bool {
	p.gen++
	if p.gen == 0 { // wrapped: no instance may hold a stale mark
		for _, pm := range b.pmList {
			for _, c := range pm.icps {
				c.gen = 0
			}
		}
		p.gen = 1
	}
	for i := range rec.Sets {
		set := &rec.Sets[i]
		if set.Err != nil {
			continue
		}
		pm := b.pmAt(&p.supHint, i, set.PMID)
		if pm == nil {
			continue
		}
		singular := len(pm.icps) == 1 && pm.icps[0].inst == semantics.InNull
		if len(pm.hint) < len(set.Values) {
			pm.hint = append(pm.hint, make([]*icp, len(set.Values)-len(pm.hint))...)
		}
		for j := range set.Values {
			inst := set.Values[j].Inst
			c := pm.hint[j]
			if c == nil || c.inst != inst {
				c = pm.byInst[inst]
				pm.hint[j] = c
			}
			if c == nil && singular {
				c = pm.icps[0]
			}
			if c != nil {
				c.gen = p.gen
			}
		}
	}
	for _, pm := range b.pmList {
		for _, c := range pm.icps {
			if c.inresult && c.gen != p.gen {
				return false
			}
		}
	}
	return true
}

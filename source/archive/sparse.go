package archive

import (
	"math"

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

// switched counts a switch between dense and sparse reading (tests).
func (r *Replay) switched() {
	if r.test != nil {
		r.test.switches++
	}
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
// of every followed metric: the instances updateBounds changes. Applying
// rec alone then leaves every bound as applying the whole run does, as for
// the superseded sets of a successor (see updateBounds), the argument
// holding for any number of records between: each instance's lower bound
// is rec's, set from the same state, and no record of the run touches an
// upper bound (they are before tReq; at tReq, rec alone).
func (r *Replay) supplies(rec *pcplog.Record) bool {
	r.gen++
	if r.gen == 0 { // wrapped: no instance may hold a stale mark
		for _, pm := range r.pmList {
			for _, c := range pm.icps {
				c.gen = 0
			}
		}
		r.gen = 1
	}
	for i := range rec.Sets {
		set := &rec.Sets[i]
		if set.Err != nil {
			continue
		}
		pm := r.bounds.pmAt(&r.supHint, i, set.PMID)
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
				c.gen = r.gen
			}
		}
	}
	for _, pm := range r.pmList {
		for _, c := range pm.icps {
			if c.inresult && c.gen != r.gen {
				return false
			}
		}
	}
	return true
}

// front returns the record at the position. With an empty window it reads
// the next record: one at or before tReq is returned as a view of the
// reader's record (direct: valid until the next read, consumed by the
// caller, never copied); a later one is copied into the window.
func (r *Replay) front(tReq float64) (w *winRec, direct bool, err error) {
	// A run of records at or before tReq whose last one holds every
	// instance they could change is passed over, unread but for that one
	// (sparse reading): it starts at the window's record when the window
	// holds only that one, a value record before tReq.
	if len(r.win) > 1 {
		return r.win[0], false, nil
	}
	var lead *winRec
	if len(r.win) == 1 {
		lead = r.win[0]
		if lead.mark || lead.t >= tReq || !r.feed.sparse {
			return lead, false, nil
		}
	}
	if !r.applyAll() {
		after, minRun := math.Inf(-1), 2
		if lead != nil {
			after, minRun = lead.t, 1
		}
		n, tFirst, res, err := r.feed.skipRun(r.secsFn, tReq, after, minRun, r.suppliesFn)
		if err != nil {
			return nil, false, err
		}
		if res == pcplog.RunRefused {
			r.refused++
		}
		if res == pcplog.RunAccepted && lead != nil {
			n, tFirst = n+1, lead.t
			r.window.pop()
		}
		r.passed += n
		r.moved += n
		if r.trackMin && n > 0 {
			// the records passed over count as applied (their times never
			// go back, from tFirst)
			r.rollMin = min(r.rollMin, tFirst)
			if r.test != nil {
				r.test.positioned += n
			}
		}
	}
	if len(r.win) > 0 {
		return r.win[0], false, nil
	}
	rec, ai, ok, err := r.feed.next()
	if err != nil || !ok {
		return nil, false, err
	}
	t := r.secs(rec.Time)
	if t <= tReq {
		r.view = winRec{t: t, mark: rec.Mark, sets: rec.Sets, ai: ai, vol: rec.Vol, off: rec.Off, time: rec.Time}
		return &r.view, true, nil
	}
	r.push(rec, ai)
	return r.win[0], false, nil
}

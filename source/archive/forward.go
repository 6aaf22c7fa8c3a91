package archive

import (
	"time"

	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

// roll is do_roll: read forward from the position while records are at or
// before tReq, updating the bounds; the position moves past them.
func (r *Replay) roll(tReq float64, seenMark *bool) error {
	for {
		w, direct, err := r.front(tReq)
		if err != nil || w == nil {
			return err
		}
		if w.t > tReq {
			return nil
		}
		r.positioning.applied(w.t, 1, r.test)
		if _, m := r.bounds.update(w, tReq, false, r.successor(w, direct, tReq)); m && seenMark != nil {
			*seenMark = true
		}
		r.pacing.movedOver(w)
		if !direct {
			r.window.pop()
		}
	}
}

// front is window.front, accounting the records sparse reading passed
// over to the pacing and the positioning.
func (r *Replay) front(tReq float64) (*winRec, bool, error) {
	supplies := r.suppliesFn
	if r.applyAll() {
		supplies = nil
	}
	w, direct, ran, err := r.window.front(&r.bounds, tReq, supplies)
	r.pacing.passedOver(ran)
	if ran.n > 0 {
		// the records passed over count as applied (their times never go
		// back, from tFirst)
		r.positioning.applied(ran.tFirst, ran.n, r.test)
	}
	return w, direct, err
}

// successor is window.successor, nil when a test applies every record.
func (r *Replay) successor(w *winRec, direct bool, tReq float64) []source.ValueSet {
	if r.applyAll() {
		return nil
	}
	return r.window.successor(w, direct, tReq)
}

// searchForward reads forward from the position until the forw searching
// instances have an upper bound (or a mark), or the end; records at or
// before tReq move the position. The records come from the position (see
// front), then the window, then a probe reading on past the window.
func (r *Replay) searchForward(tReq float64, forw int, seenMark *bool) error {
	ends := r.bounds.endings()
	var pr probe
	defer pr.close()
	done, i, direct := 0, 0, false
	for done < forw {
		if pr.f == nil && r.window.full(i, r.opts.Window) {
			last := *r.win[len(r.win)-1]
			pr.start(r.archives, last, &r.bounds, tReq)
		}
		var w *winRec
		var err error
		switch {
		case pr.f != nil:
			w, err = pr.next(r.window.secs)
		case i == 0:
			w, direct, err = r.front(tReq)
		default:
			w, err = r.window.at(&r.bounds, i)
		}
		if err != nil {
			return err
		}
		if w == nil {
			break
		}
		// a record before tReq moves the position, as in roll: its sets
		// that the next record repeats are superseded (see bounds.update).
		// The search goes on past it: only a record at or after tReq (or
		// a mark) ends a search, so the next record is applied right after.
		var next []source.ValueSet
		if pr.f == nil && i == 0 {
			next = r.successor(w, direct, tReq)
		}
		superseded := r.superseded
		ended, m := r.bounds.update(w, tReq, true, next)
		done += ended
		if m && seenMark != nil {
			*seenMark = true
		}
		if r.test != nil && next != nil {
			r.test.searchSuperseded += r.superseded - superseded
		}
		done += ends.past(w.t)
		switch {
		case pr.f != nil:
		case direct:
			direct = false // consumed in place
			r.pacing.movedOver(w)
		case w.t <= tReq && i == 0:
			r.pacing.movedOver(w)
			r.window.pop()
		default:
			i++
		}
	}
	r.bounds.searched(tReq)
	return nil
}

// endings are the searching instances known to end (tLast, unchanged
// while searching): they stop searching at a record past their end.
type endings []*icp

// endings lists the wanted instances searching that are known to end
// (in b's scratch).
func (b *bounds) endings() endings {
	e := b.ending[:0]
	for _, c := range b.want {
		if c.search && c.tLast >= 0 {
			e = append(e, c)
		}
	}
	b.ending = e
	return e
}

// past ends the search of the instances of e that end at or before tThis,
// and returns how many.
func (e *endings) past(tThis float64) (ended int) {
	k := 0
	for _, c := range *e {
		if !c.search {
			continue
		}
		if tThis >= c.tLast {
			c.search = false
			c.scNext = true
			ended++
			continue
		}
		(*e)[k] = c
		k++
	}
	*e = (*e)[:k]
	return ended
}

// probe reads on after the window's last record, for a search that
// applied every record of the window: its records are used once, right
// away, not kept.
type probe struct {
	f    *feed
	b    *bounds // the metrics followed
	prev winRec  // the last record read (the window's last at the start)
	view winRec  // the record next returned: a view of the feed's, not a copy
	// restricted: f decodes only the metrics whose bounds records at or
	// after prev.t can change (see start)
	restricted bool
}

// start reads on after the record last of archives, for a search at tReq
// of b's instances. It decodes the metrics with an instance in the result
// that is searching, or whose next bound is before tReq (unset included)
// or at or after last.t, or at a <mark> (a probe returns every mark): the
// records read are at or after last.t (> tReq; next goes back to every
// metric if time goes back in the file), and bounds.update changes no
// other instance. So the value sets of metrics made only of them are
// skipped undecoded: a search for a few rare or vanished instances reads
// the rest of the timeline at the cost of skipping it.
func (p *probe) start(archives []*pcplog.Archive, last winRec, b *bounds, tReq float64) {
	keep := b.keepIf(func(c *icp) bool {
		return c.inresult && (c.search || c.next.T < tReq || c.next.T >= last.t)
	})
	p.prev, p.b = last, b
	p.f = &feed{archives: archives, keep: keep}
	p.f.seekPos(last.ai, last.vol, last.off, last.time)
	p.restricted = true
}

// next returns the next record (nil at the end of the timeline), seconds
// from the start by secs; when time goes back in the file, it reads on
// from the record before with every metric followed, as start's premise
// is gone.
func (p *probe) next(secs func(time.Time) float64) (*winRec, error) {
	for {
		rec, ai, ok, err := p.f.next()
		if err != nil || !ok {
			return nil, err
		}
		p.view = winRec{t: secs(rec.Time), mark: rec.Mark, sets: rec.Sets, ai: ai, vol: rec.Vol, off: rec.Off, time: rec.Time}
		if p.restricted && p.view.t < p.prev.t {
			p.f.close()
			p.f = &feed{archives: p.f.archives, keep: p.b.follows}
			p.f.seekPos(p.prev.ai, p.prev.vol, p.prev.off, p.prev.time)
			p.restricted = false
			continue
		}
		p.prev = p.view
		return &p.view, nil
	}
}

// close ends the probe's reading, if any.
func (p *probe) close() {
	if p.f != nil {
		p.f.close()
	}
}

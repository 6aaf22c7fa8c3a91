package archive

import (
	"time"

	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

// windowValues bounds the values the window holds (8 MiB of them): records
// of every metric of a large host are copied into it only a few at a time.
var windowValues = 1 << 18 // a variable for tests

// window is the records read ahead of the position, and where each
// metric was in the last records seen.
type window struct {
	// the metric at each set position of the last record supplies and
	// fillWin saw (the reader's, before the window leaves out the metrics
	// not followed)
	supHint, winHint []setHint
	view             winRec    // the reader's current record, seen in place
	win              []*winRec // records read ahead of the position, oldest first
	// values held in win
	winValues int
	spare     []*winRec
}

type winRec struct {
	t    float64
	mark bool
	sets []source.ValueSet
	vals []source.InstValue
	buf  []byte
	ai   int
	vol  int
	off  int64
	time time.Time
}

// at returns the record at window position i, reading it if needed; nil
// at the end of the timeline.
func (r *Replay) at(i int) (*winRec, error) {
	for len(r.win) <= i {
		ok, err := r.readOne()
		if err != nil || !ok {
			return nil, err
		}
	}
	return r.win[i], nil
}

// pop moves the oldest record of the window to the spares.
func (wd *window) pop() {
	w := wd.win[0]
	wd.winValues -= len(w.vals)
	copy(wd.win, wd.win[1:])
	wd.win[len(wd.win)-1] = nil
	wd.win = wd.win[:len(wd.win)-1]
	wd.spare = append(wd.spare, w)
}

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
		if r.trackMin {
			r.rollMin = min(r.rollMin, w.t)
			if r.test != nil {
				r.test.positioned++
			}
		}
		if _, m := r.bounds.update(w, tReq, false, r.successor(w, direct, tReq)); m && seenMark != nil {
			*seenMark = true
		}
		r.moved++
		r.lastPos, r.lastPosMark = w.t, w.mark
		if !direct {
			r.window.pop()
		}
	}
}

// successor returns the value sets of the record that roll applies right
// after w, when w is before tReq and that record is another record of
// values at or before tReq, not earlier than w (nil otherwise, or when it
// is not read yet); see updateBounds for why w's sets that it repeats can
// be skipped.
func (r *Replay) successor(w *winRec, direct bool, tReq float64) []source.ValueSet {
	if w.mark || w.t >= tReq || r.applyAll() {
		return nil
	}
	switch {
	case !direct && len(r.win) > 1:
		if n := r.win[1]; !n.mark && n.t <= tReq && n.t >= w.t {
			return n.sets
		}
	case direct || len(r.win) == 1:
		if rec := r.feed.peek(); rec != nil && !rec.Mark {
			if t := r.secs(rec.Time); t <= tReq && t >= w.t {
				return rec.Sets
			}
		}
	}
	return nil
}

// searchForward reads forward from the position until every searching
// instance has an upper bound (or a mark), or the end; records at or before
// tReq move the position.
func (r *Replay) searchForward(tReq float64, forw int, seenMark *bool) error {
	done := 0
	i := 0
	// searching instances known to end (tLast, unchanged while searching)
	// stop searching at a record past their end
	ending := r.ending[:0]
	for _, c := range r.want {
		if c.search && c.tLast >= 0 {
			ending = append(ending, c)
		}
	}
	r.ending = ending
	forget := func(tThis float64) {
		k := 0
		for _, c := range ending {
			if !c.search {
				continue
			}
			if tThis >= c.tLast {
				c.search = false
				c.scNext = true
				done++
				continue
			}
			ending[k] = c
			k++
		}
		ending = ending[:k]
	}
	var probe *feed
	defer func() {
		if probe != nil {
			probe.close()
		}
	}()
	var pw, prev winRec
	direct, restricted := false, false
	for done < forw {
		var w *winRec
		// the probe reads on after the window's last record: once every
		// record of the window has been applied
		if probe == nil && len(r.win) > 0 && i >= len(r.win) && (i >= r.opts.Window || r.winValues >= windowValues) {
			prev = *r.win[len(r.win)-1]
			probe = &feed{archives: r.archives, keep: r.bounds.keepIf(func(c *icp) bool { return c.inresult && (c.search || c.next.T < tReq || c.next.T >= prev.t) })}
			probe.seekPos(prev.ai, prev.vol, prev.off, prev.time)
			restricted = true
		}
		if probe != nil {
			rec, ai, ok, err := probe.next()
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			// used once, right away: a view of the probe's record, not a copy
			pw = winRec{t: r.secs(rec.Time), mark: rec.Mark, sets: rec.Sets, ai: ai, vol: rec.Vol, off: rec.Off, time: rec.Time}
			if restricted && pw.t < prev.t {
				// time went back in the file: read on from this record
				// with every metric, as probeKeep's premise is gone
				probe.close()
				probe = &feed{archives: r.archives, keep: r.follows}
				probe.seekPos(prev.ai, prev.vol, prev.off, prev.time)
				restricted = false
				continue
			}
			prev = pw
			w = &pw
		} else if i == 0 {
			var err error
			w, direct, err = r.front(tReq)
			if err != nil {
				return err
			}
			if w == nil {
				break
			}
		} else {
			var err error
			w, err = r.at(i)
			if err != nil {
				return err
			}
			if w == nil {
				break
			}
		}
		// a record before tReq moves the position, as in roll: its sets
		// that the next record repeats are superseded (see updateBounds).
		// The search goes on past it: only a record at or after tReq (or
		// a mark) ends a search, so the next record is applied right after.
		var next []source.ValueSet
		if probe == nil && i == 0 {
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
		forget(w.t)
		switch {
		case probe != nil:
		case direct:
			direct = false // consumed in place
			r.moved++
			r.lastPos, r.lastPosMark = w.t, w.mark
		case w.t <= tReq && i == 0:
			r.lastPos, r.lastPosMark = w.t, w.mark
			r.window.pop()
			r.moved++
		default:
			i++
		}
	}
	for _, c := range r.want {
		if !c.search && !(c.next.T < tReq) {
			continue
		}
		if c.search && c.next.T < tReq && (c.tLast < 0 || tReq < c.tLast) {
			c.tLast = tReq
			c.scNext = true
		}
		c.search = false
	}
	return nil
}

// readOne appends the next record of the timeline to the window.
func (r *Replay) readOne() (bool, error) {
	rec, ai, ok, err := r.feed.next()
	if err != nil || !ok {
		return false, err
	}
	r.push(rec, ai)
	return true, nil
}

// push copies a record into the window.
func (r *Replay) push(rec *pcplog.Record, ai int) {
	var w *winRec
	if n := len(r.spare); n > 0 {
		w = r.spare[n-1]
		r.spare = r.spare[:n-1]
	} else {
		w = &winRec{}
	}
	r.fillWin(w, rec, ai)
	r.win = append(r.win, w)
	r.winValues += len(w.vals)
}

// fillWin copies the sets of rec that belong to followed metrics into w.
func (r *Replay) fillWin(w *winRec, rec *pcplog.Record, ai int) {
	w.time = rec.Time
	w.t = r.secs(rec.Time)
	w.mark = rec.Mark
	w.ai, w.vol, w.off = ai, rec.Vol, rec.Off
	w.sets = w.sets[:0]
	w.vals = w.vals[:0]
	w.buf = w.buf[:0]
	for i, s := range rec.Sets {
		if r.bounds.pmAt(&r.winHint, i, s.PMID) == nil {
			continue
		}
		w.vals = append(w.vals, s.Values...)
		for _, v := range s.Values {
			if !v.Value.Type().IsNumeric() {
				w.buf = append(w.buf, v.Value.Bytes()...)
			}
		}
	}
	vi, bi := 0, 0
	for i, s := range rec.Sets {
		if r.winHint[i].pm == nil { // as the loop above found
			continue
		}
		vals := w.vals[vi : vi+len(s.Values) : vi+len(s.Values)]
		for j := range vals {
			if v := vals[j].Value; !v.Type().IsNumeric() {
				n := len(v.Bytes())
				vals[j].Value.SetBytes(v.Type(), w.buf[bi:bi+n:bi+n])
				bi += n
			}
		}
		vi += len(s.Values)
		w.sets = append(w.sets, source.ValueSet{PMID: s.PMID, ValFmt: s.ValFmt, Err: s.Err, Values: vals})
	}
}

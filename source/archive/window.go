package archive

import (
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

// windowValues bounds the values the window holds (8 MiB of them): records
// of every metric of a large host are copied into it only a few at a time.
var windowValues = 1 << 18 // a variable for tests

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

// bounds is the state of the bounds search (libpcp's pmidcntl_t and
// instcntl_t of a context): each metric asked so far, its instances and
// their bounds.
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
}

// window is the records read ahead of the position, and where each
// metric was in the last records seen.
type window struct {
	setHint []setHint // the metric at each set position of the last record
	// the same for the records supplies and fillWin see (the reader's,
	// before the window leaves out the metrics not followed)
	supHint, winHint []setHint
	view             winRec    // the reader's current record, seen in place
	win              []*winRec // records read ahead of the position, oldest first
	// values held in win
	winValues int
	spare     []*winRec
}

// setHint caches the metric at one value set position of the last record:
// its PMID and state (nil when not replayed); ok once filled.
type setHint struct {
	pmid semantics.PMID
	pm   *pmState
	ok   bool
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
		r.updateBounds(w, tReq, true, nil, seenMark, r.successor(w, direct, tReq))
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
			probe = &feed{archives: r.archives, keep: r.probeKeep(tReq, prev.t)}
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
		superseded := 0
		if r.test != nil {
			superseded = r.test.superseded
		}
		r.updateBounds(w, tReq, true, &done, seenMark, next)
		if r.test != nil && next != nil {
			r.test.searchSuperseded += r.test.superseded - superseded
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

// probeKeep chooses the metrics a probe decodes: its records are all at or
// after tFrom (> tReq; searchForward falls back to every metric if time
// goes back in the file), where updateBounds changes an instance only when it
// is searching, or its next bound is before tReq (unset included) or at or
// after tFrom, or at a <mark> (a probe returns every mark). The other
// instances keep their bounds whatever the probe reads, so the value sets
// of metrics made only of them are skipped undecoded: a search for a few
// rare or vanished instances reads the rest of the timeline at the cost of
// skipping it.
func (r *Replay) probeKeep(tReq, tFrom float64) func(semantics.PMID) bool {
	keep := make(map[semantics.PMID]bool, len(r.pms))
	for p, pm := range r.pms {
		if pm == nil {
			continue
		}
		for _, c := range pm.icps {
			if c.inresult && (c.search || c.next.T < tReq || c.next.T >= tFrom) {
				keep[p] = true
				break
			}
		}
	}
	return func(p semantics.PMID) bool { return keep[p] }
}

// updateBounds is libpcp's update_bounds for one record (forw: rolling or
// searching forwards, else the initial positioning).
//
// Moving the position (roll, or searchForward at the position), next holds
// the sets of the record applied right after this one (see successor;
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
func (r *Replay) updateBounds(w *winRec, tReq float64, forw bool, done *int, seenMark *bool, next []source.ValueSet) {
	tThis := w.t
	if w.mark {
		for _, c := range r.want {
			if tThis <= tReq && (tThis >= c.prior.T || c.prior.T > tReq) {
				c.prior.T, c.prior.Kind, c.scPrior = tThis, semantics.BoundMark, false
				if seenMark != nil {
					*seenMark = true
				}
			}
			if tThis >= tReq && (tThis <= c.next.T || c.next.T < 0 || c.next.T < tReq) {
				c.next.T, c.next.Kind, c.scNext = tThis, semantics.BoundMark, false
				if c.search && done != nil {
					c.search = false
					*done++
					c.scNext = true
				}
			}
		}
		return
	}
	for i := range w.sets {
		set := &w.sets[i]
		pm := r.pmAt(&r.setHint, i, set.PMID)
		if pm == nil || set.Err != nil {
			if pm != nil && set.Err == pcplog.ErrEncoding {
				r.corrupt = true // libpcp's update_bounds: PM_ERR_LOGREC
			}
			continue
		}
		if pm.encodingChanged(set) {
			r.corrupt = true // update_bounds: "valfmt changed"
			continue
		}
		if i < len(next) && next[i].PMID == set.PMID && next[i].Err == nil && sameInstances(next[i].Values, set.Values) {
			if r.test != nil {
				r.test.superseded++
			}
			continue
		}
		if len(pm.hint) < len(set.Values) {
			pm.hint = append(pm.hint, make([]*icp, len(set.Values)-len(pm.hint))...)
		}
		for j := range set.Values {
			iv := &set.Values[j]
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
				if forw && c.search && done != nil {
					c.search = false
					*done++
					c.scNext = true
				}
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
		if r.pmAt(&r.winHint, i, s.PMID) == nil {
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

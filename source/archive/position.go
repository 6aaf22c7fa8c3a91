package archive

import (
	"math"
	"time"

	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

// positioning is the state of the first fetch's positioning (see
// position): rolling tracks the earliest record time it applies in rollMin
// while trackMin is set.
type positioning struct {
	trackMin bool
	rollMin  float64
}

// track starts tracking the earliest record applied.
func (p *positioning) track() { p.trackMin, p.rollMin = true, math.Inf(1) }

// untrack ends the tracking; rollMin stays.
func (p *positioning) untrack() { p.trackMin = false }

// applied counts n records applied (or passed over) while tracking, the
// earliest at t.
func (p *positioning) applied(t float64, n int, test *replayTest) {
	if !p.trackMin {
		return
	}
	p.rollMin = min(p.rollMin, t)
	if test != nil {
		test.positioned += n
	}
}

// position is the first fetch's positioning at tReq: libpcp's
// __pmLogSetTime (the temporal index) and the backward search of
// __pmLogFetchInterp, which finds for each wanted instance the latest
// record at or before tReq holding a value of it or a <mark> (none
// "seen": no fetch came before).
//
// The feed starts at the last index entry of the archive holding t before
// t and rolls forward to tReq, as every later fetch rolls. The instances
// that no record of that stretch bounds are searched for in the stretches
// before it, each read forward from an earlier index entry up to where the
// later stretch began (twice as many index entries each time, decoding only
// the metrics of the instances still unbounded), until every instance is
// bounded or the archive's start is reached. The search never goes past
// the archive's start: a multi-archive timeline has a <mark> there.
//
// In an archive whose record times never decrease in the file (what
// pmlogger writes) this answers what applying every record from the
// archive's start up to tReq would. Where time goes back, the stretches
// read are checked: a record of an earlier stretch at or after tReq, or
// later than a record already applied, makes the positioning start over
// from the archive's start. Records before the stretches read are not
// read at all, as libpcp does not read them: a record there later than the
// ones read (or after tReq) is not seen, where the full scan would see it.
// Index entries in compressed volumes are not used (their offsets cannot
// be checked, and reaching them decompresses the volume from its start
// anyway); a stretch whose records end before the next entry (an entry not
// at a record) makes the positioning start over too.
func (r *Replay) position(t time.Time, tReq float64) error {
	r.feed.keep = r.followed()
	r.feed.sparse = true
	ai := r.feed.archiveAt(t)
	var ents []pcplog.IndexEntry
	if r.test == nil || !r.test.fullScan {
		ents = r.entriesBefore(ai, t)
	}
	if len(ents) == 0 {
		return r.scanFromStart(t, tReq)
	}
	r.feed.seekEntry(ai, ents[len(ents)-1])
	if err := r.rollTracked(tReq); err != nil {
		return err
	}
	ok, err := r.searchBack(ai, ents, tReq)
	if err != nil || ok {
		return err
	}
	return r.restartFromStart(t, tReq)
}

// rollTracked rolls from where the feed was sought to tReq, starting its
// goroutine if it reads densely, tracking the earliest record applied.
func (r *Replay) rollTracked(tReq float64) error {
	if !r.feed.sparse {
		r.feed.pf = startPrefetch(r.feed)
	}
	r.positioning.track()
	defer r.positioning.untrack()
	return r.roll(tReq, nil)
}

// searchBack searches for the instances wanted that the roll from the
// last entry of ents (of archive ai) left without a lower bound, in the
// stretches before it (see position); false when a stretch read
// contradicts the premise (see scanStretch): the positioning must start
// over from the archive's start.
func (r *Replay) searchBack(ai int, ents []pcplog.IndexEntry, tReq float64) (bool, error) {
	missing := r.bounds.lackingPrior()
	defer func() {
		for _, c := range missing {
			c.search = false
		}
	}()
	minLater := r.rollMin
	hi := len(ents) - 1
	for span := 1; len(missing) > 0 && hi >= 0; span *= 2 {
		lo := r.usable(ai, ents, hi-span) // -1: the archive's start
		ok, err := r.scanStretch(ai, ents, lo, hi, tReq, missing, &minLater)
		if err != nil || !ok {
			return ok, err
		}
		missing = stillLacking(missing)
		hi = lo
	}
	return true, nil
}

// entriesBefore returns the index entries of archive ai before t that can
// start a stretch, each later in the file than the one before it, the last
// at a whole record followed by a record (pmlogger's closing entry, at the
// end of the archive, starts no stretch: the records before it would go
// unread). Whether the others start at a whole record (see Archive.Seek)
// is checked when a stretch starts there (see usable): a long archive has
// thousands of entries, and only a few are used.
func (r *Replay) entriesBefore(ai int, t time.Time) []pcplog.IndexEntry {
	a := r.archives[ai]
	var out []pcplog.IndexEntry
	lastVol, lastOff := -1, int64(-1)
	for _, e := range a.Index() {
		if !e.Time.Before(t) {
			break
		}
		vol := int(e.Vol) // volumes are numbered in file order
		if vol < lastVol || (vol == lastVol && e.DataOff <= lastOff) {
			continue
		}
		if !a.Plain(vol) { // none such, or
			// reaching the entry decompresses the volume from its start
			// anyway, and its offset cannot be checked (see recordAt)
			continue
		}
		out = append(out, e)
		lastVol, lastOff = vol, e.DataOff
	}
	for len(out) > 0 {
		rd := a.Records()
		ok := a.Seek(rd, out[len(out)-1]) && rd.Next()
		rd.Close()
		if ok {
			break
		}
		out = out[:len(out)-1]
	}
	return out
}

// usable returns the latest entry of ents at or before i that starts at a
// whole record (-1: none, the archive's start).
func (r *Replay) usable(ai int, ents []pcplog.IndexEntry, i int) int {
	a := r.archives[ai]
	for ; i >= 0; i-- {
		if a.Seek(a.Records(), ents[i]) {
			return i
		}
	}
	return -1
}

// scanStretch applies to the missing instances (their search flag set) the
// records of archive ai from index entry lo (-1: the archive's start) up to
// entry hi, in file order, as roll would; false when a record is at or
// after tReq or later than *minLater, the earliest record applied after
// the stretch (which it then lowers to the stretch's earliest).
func (r *Replay) scanStretch(ai int, ents []pcplog.IndexEntry, lo, hi int, tReq float64, missing []*icp, minLater *float64) (bool, error) {
	a := r.archives[ai]
	rd := a.Records()
	rd.SetInterp(true)
	defer rd.Close()
	if lo >= 0 {
		a.Seek(rd, ents[lo])
	}
	rd.Only(r.bounds.keepIf(func(c *icp) bool { return c.search }))
	endVol, endOff := int(ents[hi].Vol), ents[hi].DataOff
	least := *minLater
	reached := false
	for rd.Next() {
		rec := rd.Record()
		if rec.Vol > endVol || (rec.Vol == endVol && rec.Off >= endOff) {
			reached = true
			break
		}
		tThis := r.secs(rec.Time)
		if tThis >= tReq || tThis > *minLater {
			return false, nil
		}
		least = min(least, tThis)
		if r.test != nil {
			r.test.positioned++
		}
		r.bounds.applyPrior(rec, tThis, missing)
	}
	if err := rd.Err(); err != nil {
		return false, err
	}
	if !reached {
		// the records end before entry hi: an entry lo not at a record
		return false, nil
	}
	*minLater = least
	return true, nil
}

// scanFromStart positions by applying every record of the archive holding
// t from its start up to tReq.
func (r *Replay) scanFromStart(t time.Time, tReq float64) error {
	r.feed.seek(t)
	return r.rollTracked(tReq)
}

// restartFromStart forgets what a positioning from an index entry found
// and positions from the archive's start.
func (r *Replay) restartFromStart(t time.Time, tReq float64) error {
	r.window.restart(&feed{archives: r.archives, keep: r.followed(), sparse: true})
	r.bounds.forget()
	if r.test != nil {
		r.test.restarts++
	}
	return r.scanFromStart(t, tReq)
}

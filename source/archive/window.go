package archive

import (
	"math"
	"time"

	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

// windowValues bounds the values the window holds (8 MiB of them): records
// of every metric of a large host are copied into it only a few at a time.
var windowValues = 1 << 18 // a variable for tests

// window is the reading at the position: the feed, and the records read
// ahead of the position and not yet applied. It reads the bounds' metrics
// (which of a record's sets to keep) through the bounds it is given.
type window struct {
	feed *feed
	secs func(time.Time) float64 // Replay.secs, made once
	// the metric at each set position of the last record fill saw (the
	// reader's, before the window leaves out the metrics not followed)
	winHint []setHint
	view    winRec    // the reader's current record, seen in place
	win     []*winRec // records read ahead of the position, oldest first
	// values held in win
	winValues int
	spare     []*winRec
}

// winRec is a record of the window, its time in seconds from the start:
// its value sets of the metrics followed, copied, or a view of the
// reader's record (see front).
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

// run is what sparse reading passed over at the position before a record
// (see front): n records, the first at tFirst; res is the reader's
// verdict on the run (refused: read on record by record).
type run struct {
	n      int
	tFirst float64
	res    pcplog.RunResult
}

// restart reads from f, a new feed, with no record read ahead (the old
// feed is closed).
func (wd *window) restart(f *feed) {
	if wd.feed != nil {
		wd.feed.close()
	}
	wd.feed = f
	wd.spare = append(wd.spare, wd.win...)
	wd.win = wd.win[:0]
	wd.winValues = 0
}

// full reports whether a search that applied i records of the window has
// applied them all and the window may hold no more (size records, or
// windowValues values): it reads on with a probe (see searchForward).
func (wd *window) full(i, size int) bool {
	return len(wd.win) > 0 && i >= len(wd.win) && (i >= size || wd.winValues >= windowValues)
}

// front returns the record at the position, and what sparse reading passed
// over before it (with supplies, pacing's test; nil: nothing is passed
// over). With an empty window it reads the next record: one at or before
// tReq is returned as a view of the reader's record (direct: valid until
// the next read, consumed by the caller, never copied); a later one is
// copied into the window.
func (wd *window) front(b *bounds, tReq float64, supplies func(*pcplog.Record) bool) (w *winRec, direct bool, ran run, err error) {
	// A run of records at or before tReq whose last one holds every
	// instance they could change is passed over, unread but for that one
	// (sparse reading): it starts at the window's record when the window
	// holds only that one, a value record before tReq.
	if len(wd.win) > 1 {
		return wd.win[0], false, ran, nil
	}
	var lead *winRec
	if len(wd.win) == 1 {
		lead = wd.win[0]
		if lead.mark || lead.t >= tReq || !wd.feed.sparse {
			return lead, false, ran, nil
		}
	}
	if supplies != nil {
		after, minRun := math.Inf(-1), 2
		if lead != nil {
			after, minRun = lead.t, 1
		}
		n, tFirst, res, err := wd.feed.skipRun(wd.secs, tReq, after, minRun, supplies)
		if err != nil {
			return nil, false, ran, err
		}
		if res == pcplog.RunAccepted && lead != nil {
			n, tFirst = n+1, lead.t
			wd.pop()
		}
		ran = run{n: n, tFirst: tFirst, res: res}
	}
	if len(wd.win) > 0 {
		return wd.win[0], false, ran, nil
	}
	rec, ai, ok, err := wd.feed.next()
	if err != nil || !ok {
		return nil, false, ran, err
	}
	t := wd.secs(rec.Time)
	if t <= tReq {
		wd.view = winRec{t: t, mark: rec.Mark, sets: rec.Sets, ai: ai, vol: rec.Vol, off: rec.Off, time: rec.Time}
		return &wd.view, true, ran, nil
	}
	wd.push(b, rec, ai)
	return wd.win[0], false, ran, nil
}

// at returns the record at window position i, reading it if needed; nil
// at the end of the timeline.
func (wd *window) at(b *bounds, i int) (*winRec, error) {
	for len(wd.win) <= i {
		rec, ai, ok, err := wd.feed.next()
		if err != nil || !ok {
			return nil, err
		}
		wd.push(b, rec, ai)
	}
	return wd.win[i], nil
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

// successor returns the value sets of the record that is applied right
// after w, the record at the position (direct: front's view), when w is
// before tReq and that record is another record of values at or before
// tReq, not earlier than w (nil otherwise, or when it is not read yet);
// see bounds.update for why w's sets that it repeats can be skipped.
func (wd *window) successor(w *winRec, direct bool, tReq float64) []source.ValueSet {
	if w.mark || w.t >= tReq {
		return nil
	}
	switch {
	case !direct && len(wd.win) > 1:
		if n := wd.win[1]; !n.mark && n.t <= tReq && n.t >= w.t {
			return n.sets
		}
	case direct || len(wd.win) == 1:
		if rec := wd.feed.peek(); rec != nil && !rec.Mark {
			if t := wd.secs(rec.Time); t <= tReq && t >= w.t {
				return rec.Sets
			}
		}
	}
	return nil
}

// push copies a record into the window.
func (wd *window) push(b *bounds, rec *pcplog.Record, ai int) {
	var w *winRec
	if n := len(wd.spare); n > 0 {
		w = wd.spare[n-1]
		wd.spare = wd.spare[:n-1]
	} else {
		w = &winRec{}
	}
	wd.fill(b, w, rec, ai)
	wd.win = append(wd.win, w)
	wd.winValues += len(w.vals)
}

// fill copies the sets of rec that belong to metrics b follows into w.
func (wd *window) fill(b *bounds, w *winRec, rec *pcplog.Record, ai int) {
	w.time = rec.Time
	w.t = wd.secs(rec.Time)
	w.mark = rec.Mark
	w.ai, w.vol, w.off = ai, rec.Vol, rec.Off
	w.sets = w.sets[:0]
	w.vals = w.vals[:0]
	w.buf = w.buf[:0]
	for i, s := range rec.Sets {
		if b.pmAt(&wd.winHint, i, s.PMID) == nil {
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
		if wd.winHint[i].pm == nil { // as the loop above found
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

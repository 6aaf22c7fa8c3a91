package archive

import (
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

// feed reads the records of the timeline in order, with a <mark> record
// synthesized between consecutive archives, 1 ms after the last record of
// the earlier one (as pmlogextract marks a gap).
type feed struct {
	archives []*pcplog.Archive
	keep     func(semantics.PMID) bool // metrics the readers decode
	ai       int
	r        *pcplog.Reader
	started  bool
	last     time.Time
	mark     pcplog.Record
	out      *pcplog.RecordBuffer // where the readers decode (nil: their own buffer)
	pf       *prefetch            // reading ahead in a goroutine (see prefetch)
	tails    *pcplog.Tails        // in sparse reading, the goroutine instead (see tails)
	// runs to read before starting tails again (it was lagging)
	tailsWait int
	// sparse: no prefetching; plain volumes are read record by record, so
	// that runs of records can be passed over (see window.front)
	sparse bool
	// the last record next returned: archive, volume (-1: a synthesized
	// mark), offset and time
	lastAi, lastVol int
	lastOff         int64
	lastTime        time.Time
	delivered       bool
}

// archiveAt returns the archive holding t: the last one starting at or
// before t (the first when t is before them all).
func (f *feed) archiveAt(t time.Time) int {
	ai := 0
	for i, a := range f.archives {
		if !a.Label().Start.After(t) {
			ai = i
		}
	}
	return ai
}

// seek starts the feed at the start of the archive holding t (see
// Replay.position: a backward search from t never goes further, since the
// archive before it ends with a <mark>).
func (f *feed) seek(t time.Time) {
	f.ai = f.archiveAt(t)
	f.r = f.reader(f.ai)
	f.started = true
}

// seekEntry starts the feed at an index entry of archive ai.
func (f *feed) seekEntry(ai int, e pcplog.IndexEntry) {
	f.ai = ai
	a := f.archives[ai]
	r := f.reader(ai)
	a.Seek(r, e)
	f.r = r
	f.started = true
}

// reader returns a Reader over archive ai from its start, decoding only
// the followed metrics.
func (f *feed) reader(ai int) *pcplog.Reader {
	r := f.archives[ai].Records()
	r.SetSparse(f.sparse)
	r.SetInterp(true)
	if f.keep != nil {
		r.Only(f.keep)
	}
	return r
}

// seekPos starts the feed just after the record at (vol, off) of archive ai.
func (f *feed) seekPos(ai, vol int, off int64, t time.Time) {
	f.ai = ai
	f.started = true
	f.last = t
	if vol < 0 { // a synthesized mark: the next archive's start
		f.r = f.reader(ai)
		return
	}
	r := f.reader(ai)
	r.SeekVolume(vol, off)
	f.r = r
	r.Next() // the record itself
}

// next returns the next record of the timeline, valid until the following
// call; at the end, ok is false and a later call tries again (the archive
// may grow).
func (f *feed) next() (*pcplog.Record, int, bool, error) {
	var rec *pcplog.Record
	var ai int
	var ok bool
	var err error
	if f.pf != nil {
		rec, ai, ok, err = f.pf.next()
	} else {
		rec, ai, ok, err = f.read()
	}
	if ok {
		f.lastAi, f.lastVol, f.lastOff, f.lastTime, f.delivered = ai, rec.Vol, rec.Off, rec.Time, true
	}
	return rec, ai, ok, err
}

// goSparse stops the prefetching goroutine and reads on without one, record
// by record, from the record after the last one next returned.
func (f *feed) goSparse() bool {
	if f.sparse || f.pf == nil || f.pf.err != nil || !f.delivered || !f.plainAt(f.lastAi, f.lastVol) {
		return false
	}
	f.pf.stop()
	f.pf, f.out = nil, nil // the slots were the goroutine's
	if f.r != nil {
		f.r.Close()
	}
	f.sparse = true
	f.seekPos(f.lastAi, f.lastVol, f.lastOff, f.lastTime)
	return true
}

// plainAt reports whether volume vol of archive ai is a plain file: sparse
// reading passes over records of plain volumes only (a compressed one is
// read whole, and better ahead in the goroutine).
func (f *feed) plainAt(ai, vol int) bool {
	return f.archives[ai].Plain(vol)
}

// goDense starts the prefetching goroutine at the feed's position (the
// record after the last one next returned): the fetches use most records.
func (f *feed) goDense() bool {
	if !f.sparse || f.pf != nil {
		return false
	}
	f.sparse = false
	if f.r != nil {
		f.r.SetSparse(false)
	}
	f.stopTails()
	f.pf = startPrefetch(f)
	return true
}

// skipRun passes over the records of a run at the position that applying
// the run's last record alone makes superseded (see pcplog.Reader.SkipRun),
// returning how many; only a sparse feed does.
func (f *feed) skipRun(secs func(time.Time) float64, tReq, after float64, minRun int, ok func(*pcplog.Record) bool) (int, float64, pcplog.RunResult, error) {
	if !f.sparse || f.pf != nil || f.r == nil {
		return 0, 0, pcplog.RunNone, nil
	}
	if f.tails == nil {
		if f.tailsWait > 0 {
			f.tailsWait--
		} else {
			f.tails = pcplog.StartTails()
		}
	}
	f.r.DecodeInto(f.out) // where read decodes the record Next returns
	f.r.ReadAheadWith(f.tails)
	n, tFirst, res, err := f.r.SkipRun(secs, tReq, after, minRun, ok)
	if f.tails != nil && f.tails.Lagging() {
		f.stopTails()
		f.tailsWait = pcplog.TailsPause
	}
	return n, tFirst, res, err
}

// peek returns the record the following next will return, nil if it is
// not known without reading it (no prefetching goroutine) or there is none.
func (f *feed) peek() *pcplog.Record {
	if f.pf != nil {
		return f.pf.peek()
	}
	return nil
}

func (f *feed) read() (*pcplog.Record, int, bool, error) {
	if !f.started {
		f.r = f.reader(0)
		f.started = true
	}
	for {
		f.r.DecodeInto(f.out)
		if f.r.Next() {
			rec := f.r.Record()
			f.last = rec.Time
			return rec, f.ai, true, nil
		}
		if err := f.r.Err(); err != nil {
			return nil, f.ai, false, err
		}
		if f.ai+1 >= len(f.archives) {
			return nil, f.ai, false, nil
		}
		f.r.Close()
		f.ai++
		f.r = f.reader(f.ai)
		if !f.last.IsZero() {
			f.mark = pcplog.Record{Time: f.last.Add(time.Millisecond), Mark: true, Vol: -1}
			return &f.mark, f.ai, true, nil
		}
	}
}

// stopTails ends the goroutine reading the runs' ends ahead, if any.
func (f *feed) stopTails() {
	if f.tails != nil {
		f.tails.Stop()
		f.tails = nil
		if f.r != nil {
			f.r.ReadAheadWith(nil)
		}
	}
}

func (f *feed) close() {
	f.stopTails()
	if f.pf != nil {
		f.pf.stop()
		f.pf = nil
	}
	if f.r != nil {
		f.r.Close()
		f.r = nil
	}
}

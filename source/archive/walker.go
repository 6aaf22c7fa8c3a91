package archive

import (
	"cmp"
	"math"
	"os"
	"slices"
	"sync/atomic"
)

// recHead is what a walk over the records of a volume reads of one: its
// header (length, numpmid, timestamp) and whether its trailer repeats the
// length; end: no whole header at off (the end of the data).
type recHead struct {
	off     int64
	len     int32
	np      int32
	tb      [12]byte // the timestamp (v2: 8 bytes, v3: 12)
	trailer bool     // the trailer was read and equals len
	end     bool
}

// walkBatch is the number of record heads a walker hands over at once (a
// variable for tests).
var walkBatch = 64

// walker reads the heads of the records of a plain volume in a goroutine of
// its own, ahead of sparse reading (Reader.skipRun), which then finds its
// runs without a read per record on its own path. Heads come in file order
// from a record's start, by batches; the walk stops after a record whose
// length is out of range or whose trailer differs, or at the end of the
// data (a head marked end). At most four batches are read ahead.
//
// Given the times of the fetches to come (see want: a regular step), it
// also reads ahead the records each fetch's run will end with: the last
// record at or before the fetch's time and the one after it, which sparse
// reading then takes (see take) instead of reading them on its own path.
// It reads up to aheadRuns runs ahead, so that it keeps working while the
// fetches go on (on this kind of machine a goroutine that had nothing to
// do takes a few hundred microseconds to run again once given work), with
// few buffers, which stay in the processor's caches (W2 at 1 s: 4 runs
// ahead as fast as 3 and 6, and 0.5 ms faster than 12).
type walker struct {
	f       *os.File
	hl      int
	batches chan []recHead
	quit    chan struct{}
	done    chan struct{}
	wants   chan recWant // the fetches to come (see want)
	reads   chan recRead // the runs' last records, read for them
	free    chan []byte  // buffers handed back (see recycle)
	// busy is 1 + the offset of the records being read for a run (until
	// handed over), 0 when none
	busy atomic.Int64
	// front is the offset after the last head the reader read itself
	// (see at): the walk goes on from there when behind
	front  atomic.Int64
	held   recRead // a read taken from reads that was ahead of the run
	isHeld bool
	cur    []recHead
	i      int
	closed bool // batches is closed: no head after cur
}

// recWant gives the fetches to come: at t, t+step, t+2*step..., the first
// one's run starting at the record at from (times in seconds, see
// Replay.secs).
type recWant struct {
	from    int64
	t, step float64
}

// recRead is the bytes of the file from off: a run's last record and,
// when not large, the one after it (fewer at the end of the data).
type recRead struct {
	off int64
	b   []byte
}

const (
	// walkHist is the number of heads a walker keeps to find the end of a
	// run among those already walked.
	walkHist = 1024
	// aheadRuns is the number of runs whose last records a walker reads
	// ahead; aheadMax the largest read it makes for one.
	aheadRuns = 4
	aheadMax  = 2 << 20
)

// startWalker starts a walk at from; secs converts a head's timestamp
// bytes to the replay's seconds (for wants).
func startWalker(f *os.File, hdrSize int, from int64, secs func(tb []byte) float64) *walker {
	w := &walker{f: f, hl: hdrSize, batches: make(chan []recHead, 4), quit: make(chan struct{}), done: make(chan struct{}),
		wants: make(chan recWant, 1), reads: make(chan recRead, aheadRuns), free: make(chan []byte, aheadRuns+2)}
	go w.run(from, secs)
	return w
}

func (w *walker) run(pos int64, secs func(tb []byte) float64) {
	defer close(w.done)
	f, hl := w.f, w.hl
	h := make([]byte, hl+4) // a trailer, then the header of the next record
	batch := make([]recHead, 0, walkBatch+1)
	hist := make([]recHead, 0, walkHist)
	add := func(e recHead) {
		batch = append(batch, e)
		if len(hist) == cap(hist) {
			hist = hist[:copy(hist, hist[len(hist)/2:])]
		}
		hist = append(hist, e)
	}
	walking, started, batchesClosed := true, false, false
	// walk reads the head of the record at pos (and the trailer of the
	// one before it with it)
	walk := func() {
		if front := w.front.Load(); front > pos {
			// the reader read the heads up to front itself: on from there
			pos, started = front, false
		}
		if !started {
			started = true
			if k, _ := f.ReadAt(h[4:], pos); k < hl {
				add(recHead{off: pos, end: true})
				walking = false
				return
			}
		}
		e := recHead{off: pos, len: int32(be32(h[4:])), np: int32(be32(h[hl:]))}
		copy(e.tb[:], h[8:hl])
		l := int(e.len)
		if l < hl+4 || l > maxRecordSize-1 {
			add(e)
			walking = false
			return
		}
		k, _ := f.ReadAt(h, pos+int64(l)-4)
		e.trailer = k >= 4 && int(int32(be32(h))) == l
		add(e)
		if !e.trailer {
			walking = false
			return
		}
		pos += int64(l)
		if k < len(h) {
			add(recHead{off: pos, end: true})
			walking = false
		}
	}
	var sched recWant
	runs := 0 // runs read for sched
	active := false
	var rd recRead // read, not handed over yet (when hasRd)
	hasRd := false
	apply := func(wt recWant) {
		sched, runs, active = wt, 0, true
		if hasRd {
			w.putBack(rd.b)
			rd, hasRd = recRead{}, false
			w.busy.Store(0)
		}
	}
	// readRun reads the last records of the next run of sched, once the
	// heads walked show them
	readRun := func() bool {
		off, n, ok := wantedRun(hist, sched.from, sched.t+float64(runs)*sched.step, hl, secs)
		if !ok {
			return false
		}
		if n == 0 || n > aheadMax {
			active = false // the fetches read on their own from there
			return true
		}
		var b []byte
		select {
		case b = <-w.free:
		default:
		}
		if cap(b) < n {
			b = make([]byte, n)
		}
		w.busy.Store(off + 1)
		k, _ := f.ReadAt(b[:n], off)
		rd, hasRd = recRead{off: off, b: b[:k]}, true
		sched.from = off
		runs++
		return true
	}
	for {
		progress := false
		if walking && len(batch) < walkBatch {
			walk()
			progress = true
		}
		if active && !hasRd && readRun() {
			progress = true
		}
		var bc chan<- []recHead
		if len(batch) >= walkBatch || (!walking && len(batch) > 0) {
			bc = w.batches
		}
		var rc chan<- recRead
		if hasRd {
			rc = w.reads
		}
		if !walking && len(batch) == 0 && !batchesClosed {
			close(w.batches)
			batchesClosed = true
		}
		// hand over what is ready; wait only when there is nothing to do
		var goOn <-chan struct{}
		if progress {
			goOn = closedChan
		}
		select {
		case <-goOn:
		case bc <- batch:
			batch = make([]recHead, 0, walkBatch+1)
		case rc <- rd:
			rd, hasRd = recRead{}, false
			w.busy.Store(0)
		case wt := <-w.wants:
			apply(wt)
		case <-w.quit:
			return
		}
	}
}

// closedChan is always ready to receive from.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// wantedRun finds, among the heads walked (hist), where the run from the
// record at from for a fetch at t ends, as Reader.skipRun finds it: the
// last record at or before t of the value records in time order from
// there (the first one at t, if any). It returns the bytes to read: that
// record and, when not large, the one after it; ok false when the heads
// walked do not tell yet, n 0 when there is nothing to read.
func wantedRun(hist []recHead, from int64, t float64, hl int, secs func(tb []byte) float64) (off int64, n int, ok bool) {
	// from, or the first record after it the walk met (it goes on from
	// where the reader is when behind)
	i, _ := slices.BinarySearchFunc(hist, from, func(e recHead, off int64) int { return cmp.Compare(e.off, off) })
	if i == len(hist) {
		return 0, 0, false
	}
	j := -1
	last := math.Inf(-1)
	for ; i < len(hist); i++ {
		e := &hist[i]
		l, np := int(e.len), int(e.np)
		if e.end || l < hl+4 || l > maxRecordSize-1 || np <= 0 || np > (l-hl-4)/8 || !e.trailer {
			break
		}
		et := secs(e.tb[:])
		if et > t || et < last {
			break
		}
		j, last = i, et
		if et == t {
			i++
			break
		}
	}
	if j < 0 {
		return 0, 0, true
	}
	if i == len(hist) {
		return 0, 0, false // the record after j is not walked yet
	}
	n = int(hist[j].len)
	if e := hist[i]; !e.end && e.len >= int32(hl+4) && e.len <= 1<<20 {
		n += int(e.len)
	}
	return hist[j].off, n, true
}

// putBack keeps a buffer for a later read, if there is room.
func (w *walker) putBack(b []byte) {
	select {
	case w.free <- b:
	default:
	}
}

// want tells the walk the fetches to come (see recWant), replacing what it
// was told before; it reads their runs' last records ahead from there.
func (w *walker) want(from int64, t, step float64) {
	select {
	case <-w.wants:
	default:
	}
	w.wants <- recWant{from: from, t: t, step: step}
}

// take returns the bytes read ahead from off when they hold at least n
// bytes (a run's last records), waiting for a read of them under way; nil
// otherwise. Reads of runs before off are dropped. The buffer is the
// caller's; it may hand it back with recycle.
func (w *walker) take(off int64, n int) []byte {
	for {
		var rr recRead
		if w.isHeld {
			rr, w.held, w.isHeld = w.held, recRead{}, false
		} else {
			got := false
			select {
			case rr = <-w.reads:
				got = true
			default:
			}
			if !got && w.busy.Load() == off+1 {
				select {
				case rr = <-w.reads:
					got = true
				case <-w.done:
				}
			} else if !got {
				// the read may have been handed over since the look above
				select {
				case rr = <-w.reads:
					got = true
				default:
				}
			}
			if !got {
				return nil
			}
		}
		switch {
		case rr.off < off:
			w.recycle(rr.b)
		case rr.off > off:
			w.held, w.isHeld = rr, true
			return nil
		case len(rr.b) < n:
			w.recycle(rr.b)
			return nil
		default:
			return rr.b
		}
	}
}

// recycle hands a buffer back to the walk for later reads.
func (w *walker) recycle(b []byte) {
	if cap(b) >= 4<<10 {
		w.putBack(b[:0])
	}
}

// at returns the head of the record at off: the walk's, or read here when
// the walk has not handed it over yet (the walk then goes on after it);
// false when the walk stopped before (or passed it: off is not a record's
// start it walked).
func (w *walker) at(off int64) (recHead, bool) {
	for {
		for ; w.i < len(w.cur); w.i++ {
			if e := w.cur[w.i]; e.off >= off {
				return e, e.off == off
			}
		}
		if w.closed {
			return recHead{}, false
		}
		var b []recHead
		var ok bool
		select {
		case b, ok = <-w.batches:
		default:
			// the walk is behind (its goroutine may not have run yet):
			// this head is read here rather than waited for, and the
			// walk goes on after it
			e := w.head(off)
			if e.trailer {
				w.front.Store(off + int64(e.len))
			}
			return e, true
		}
		if !ok {
			w.closed = true
			continue
		}
		w.cur, w.i = b, 0
	}
}

// head reads the head of the record at off as the walk does.
func (w *walker) head(off int64) recHead {
	h := make([]byte, w.hl)
	if k, _ := w.f.ReadAt(h, off); k < w.hl {
		return recHead{off: off, end: true}
	}
	e := recHead{off: off, len: int32(be32(h)), np: int32(be32(h[w.hl-4:]))}
	copy(e.tb[:], h[4:w.hl-4])
	if l := int(e.len); l >= w.hl+4 && l <= maxRecordSize-1 {
		k, _ := w.f.ReadAt(h[:4], off+int64(l)-4)
		e.trailer = k == 4 && int(int32(be32(h))) == l
	}
	return e
}

// stop ends the walk and waits for the goroutine.
func (w *walker) stop() {
	close(w.quit)
	<-w.done
}

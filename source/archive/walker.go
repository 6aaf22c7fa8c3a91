package archive

import "os"

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
type walker struct {
	batches chan []recHead
	quit    chan struct{}
	done    chan struct{}
	cur     []recHead
	i       int
	closed  bool // batches is closed: no head after cur
}

func startWalker(f *os.File, hdrSize int, from int64) *walker {
	w := &walker{batches: make(chan []recHead, 4), quit: make(chan struct{}), done: make(chan struct{})}
	go w.run(f, hdrSize, from)
	return w
}

func (w *walker) run(f *os.File, hl int, pos int64) {
	defer close(w.done)
	defer close(w.batches)
	h := make([]byte, hl+4) // a trailer, then the header of the next record
	batch := make([]recHead, 0, walkBatch)
	send := func() bool {
		select {
		case w.batches <- batch:
			batch = make([]recHead, 0, walkBatch)
			return true
		case <-w.quit:
			return false
		}
	}
	if k, _ := f.ReadAt(h[4:], pos); k < hl {
		batch = append(batch, recHead{off: pos, end: true})
		send()
		return
	}
	for {
		e := recHead{off: pos, len: int32(be32(h[4:])), np: int32(be32(h[hl:]))}
		copy(e.tb[:], h[8:hl])
		l := int(e.len)
		if l < hl+4 || l > maxRecordSize-1 {
			batch = append(batch, e)
			send()
			return
		}
		k, _ := f.ReadAt(h, pos+int64(l)-4)
		e.trailer = k >= 4 && int(int32(be32(h))) == l
		batch = append(batch, e)
		if !e.trailer {
			send()
			return
		}
		pos += int64(l)
		if k < len(h) {
			batch = append(batch, recHead{off: pos, end: true})
			send()
			return
		}
		if len(batch) == walkBatch && !send() {
			return
		}
	}
}

// at returns the head of the record at off, waiting for the walk to reach
// it; false when the walk stopped before (or passed it: off is not a
// record's start it walked).
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
		b, ok := <-w.batches
		if !ok {
			w.closed = true
			continue
		}
		w.cur, w.i = b, 0
	}
}

// stop ends the walk and waits for the goroutine.
func (w *walker) stop() {
	close(w.quit)
	<-w.done
}

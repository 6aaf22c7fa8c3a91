package pcplog

import (
	"os"
	"sync/atomic"
)

// Tails reads ahead, in sparse reading, what each coming run will need
// (see Reader.skipRun): the heads of its records and the bytes of its last
// record and the one after it, which skipRun reads on its own path
// otherwise. It takes the prefetching goroutine's place (a feed runs one or
// the other, never both): sparse reading passes over most records, but
// copying the two it reads out of the page cache, and reading the heads,
// is most of its reading. Where a run starts and ends is predicted from
// the last two runs (a regular step over records of regular sizes gives
// runs at a regular stride of bytes); what was read is used only for a run
// starting at the predicted offset of the same file (and the bytes only
// where it ends at the predicted offset, its last record whole in them),
// and a wrong prediction drops the reads in flight and predicts again from
// the run found. A head read ahead is used only when whole (a trailer
// equal to its length): the volumes only grow, so it is what the main path
// would read.
//
// It earns its place while the other processor is free: BenchmarkReplayCLI
// (W2, 59 metrics at 1 s) took 9.5-10.5 ms with it against 12.0-13.8 ms
// without, and the command 17.3-18.6 ms against 22.4-22.8 ms (alternating
// runs); with that processor kept busy, 24-25 ms against 23-24.5 ms.
type Tails struct {
	reqs chan tailReq
	got  chan tailRead
	free chan []byte // buffers handed back
	quit chan struct{}
	done chan struct{}
	gen  atomic.Int64 // requests of an older generation are not read
	// the start of the run the main path is at: requests for runs up to
	// it are not read
	at atomic.Int64
	// 1 + the start of the run being read, 0 when none
	busy atomic.Int64
	// the main path's side
	cur       int64     // generation of the requests in q
	q         []tailReq // requests of generation cur in flight, in order
	inflight  int       // requests sent and not received, of any generation
	held      tailRead  // what was read for the run at hand (see heads)
	lastF     *os.File  // the file and start of the last run
	lastFirst int64
	retired   []byte // the buffer replaced last, handed back at the next swap
	// lag counts the runs the goroutine was behind on, less those it
	// served (see lagging)
	lag int
}

// tailsUsed, tailsMissed and tailsBehind count the runs whose ends tails
// had read ahead, those it had predicted elsewhere and those it had not
// read yet (tests).
var tailsUsed, tailsMissed, tailsBehind atomic.Int64

// tailsWaitAll makes the main path wait for every read asked for, as if
// the goroutine were never behind (tests).
var tailsWaitAll bool

// tailReq asks for the heads of the records from first on, up to the
// first one after off, and n bytes from off.
type tailReq struct {
	f          *os.File
	first, off int64
	n, hl      int
	gen        int64
}

type tailRead struct {
	req   tailReq
	b     []byte // the bytes read from off
	heads []placedHead
}

// placedHead is a record's head and its offset.
type placedHead struct {
	off int64
	h   recHead
}

// tailRuns is the number of runs tails reads ahead: enough that the
// goroutine keeps working while fetches go on (one that had nothing to do
// takes a while to run again once given work); tailMax the largest read
// for one, tailHeads the most heads.
const (
	tailRuns  = 4
	tailMax   = 2 << 20
	tailHeads = 1024
)

// StartTails starts the read-ahead goroutine; Stop ends it.
func StartTails() *Tails {
	t := &Tails{
		reqs: make(chan tailReq, 2*tailRuns),
		got:  make(chan tailRead, 2*tailRuns),
		free: make(chan []byte, 2*tailRuns+2),
		quit: make(chan struct{}),
		done: make(chan struct{}),
	}
	go t.run()
	return t
}

func (t *Tails) run() {
	defer close(t.done)
	var hb []byte
	for {
		var q tailReq
		select {
		case q = <-t.reqs:
		case <-t.quit:
			return
		}
		rd := tailRead{req: q}
		t.busy.Store(q.first + 1)
		if q.gen == t.gen.Load() && q.first > t.at.Load() {
			if len(hb) < q.hl+4 {
				hb = make([]byte, q.hl+4)
			}
			hs := heads{f: q.f, hl: q.hl, b: hb[:q.hl+4]}
			for pos := q.first; len(rd.heads) < tailHeads; {
				e := hs.at(pos)
				rd.heads = append(rd.heads, placedHead{pos, e})
				if e.end || !e.trailer || pos > q.off {
					break
				}
				pos += int64(e.len)
			}
			var b []byte
			select {
			case b = <-t.free:
			default:
			}
			if cap(b) < q.n {
				b = make([]byte, q.n)
			}
			k, _ := q.f.ReadAt(b[:q.n], q.off)
			rd.b = b[:k]
		}
		t.got <- rd // never blocks: at most cap(reqs) in flight
		t.busy.Store(0)
	}
}

// heads returns the heads read ahead for a run starting at first in f
// (nil if none), and keeps what was read for it for take. It waits for
// them only while they are being read: when the goroutine is behind (the
// other processor busy), the caller reads them, and the goroutine passes
// over the request; a goroutine lagging so stops (see lagging).
func (t *Tails) heads(f *os.File, first int64) []placedHead {
	t.held = tailRead{}
	t.at.Store(first)
	if len(t.q) > 0 && t.q[0].f == f && t.q[0].first == first {
		t.q = t.q[1:]
		for {
			var rd tailRead
			select {
			case rd = <-t.got:
			default:
				if t.busy.Load() != first+1 && !tailsWaitAll {
					tailsBehind.Add(1)
					t.lag++
					return nil // left in flight, stale when it comes
				}
				rd = <-t.got
			}
			t.inflight--
			if rd.req.gen == t.cur && rd.req.first == first {
				t.held = rd
				return rd.heads
			}
			t.recycle(rd.b) // stale, or for a run before
		}
	}
	if len(t.q) > 0 { // a wrong prediction: the reads in flight are stale
		tailsMissed.Add(1)
		t.cur++
		t.gen.Store(t.cur)
		t.q = t.q[:0]
	}
	for t.inflight > 0 { // stale, all of them
		select {
		case rd := <-t.got:
			t.inflight--
			t.recycle(rd.b)
			continue
		default:
		}
		break
	}
	return nil
}

// take returns the bytes read ahead from j for the run found from first
// (see heads), ending with a record of jLen bytes at j, nil if none (then
// the caller reads them); hl is the size of a record's header, and want
// what the caller reads from j (j and the record after it), for the reads
// of the runs to come.
func (t *Tails) take(f *os.File, hl int, first, j int64, jLen, want int) []byte {
	var b []byte
	if h := t.held; h.req.f == f && h.req.first == first && h.req.off == j && len(h.b) >= jLen {
		b = h.b
		tailsUsed.Add(1)
		t.lag = max(t.lag-1, 0)
	} else {
		t.recycle(h.b)
	}
	t.held = tailRead{}
	stride := first - t.lastFirst
	if t.lastF != f || stride <= 0 || want > tailMax {
		stride = 0
	}
	t.lastF, t.lastFirst = f, first
	if stride > 0 {
		next := first + stride
		if len(t.q) > 0 {
			next = t.q[len(t.q)-1].first + stride
		}
		for len(t.q) < tailRuns && t.inflight < cap(t.reqs) {
			q := tailReq{f: f, first: next, off: next + (j - first), n: want, hl: hl, gen: t.cur}
			t.reqs <- q
			t.q = append(t.q, q)
			t.inflight++
			next += stride
		}
	}
	return b
}

// Lagging reports whether the goroutine fell behind the main path on
// more runs than it served lately (tailsLag): the processors are busy, and
// reading on the main path alone costs less.
func (t *Tails) Lagging() bool { return t.lag >= tailsLag }

// tailsLag is the lag (see Lagging) that stops Tails, and TailsPause the
// number of runs read on the main path before trying again.
const (
	tailsLag   = 8
	TailsPause = 256
)

// swapped hands back buf, the volume buffer b replaced: after the next
// swap, so that a record still pointing into it is not overwritten under
// it.
func (t *Tails) swapped(buf []byte) {
	t.recycle(t.retired)
	t.retired = buf
}

func (t *Tails) recycle(b []byte) {
	if cap(b) == 0 {
		return
	}
	select {
	case t.free <- b[:0]:
	default:
	}
}

// Stop ends the goroutine and waits for it.
func (t *Tails) Stop() {
	close(t.quit)
	<-t.done
}

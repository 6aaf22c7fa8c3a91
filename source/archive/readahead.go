package archive

import (
	"io"
	"sync/atomic"
)

// aheadStarted counts the read-aheads started (tests).
var aheadStarted atomic.Int64

// readAhead reads a volume in a goroutine of its own, a few chunks ahead of
// the decoding: the copy out of the page cache (or the decompression)
// overlaps with decoding the records read before. Each chunk holds whole
// records (their lengths walked, not checked further: the decoder checks
// every record), except the last one before the end of the data, a read
// error or a record length out of range, which holds every byte read. At
// the end of the data the goroutine keeps the partial last record and waits
// until asked to read on (the writer may append), then sends it again with
// what follows.
//
// Buffers only grow while full of data without a whole record in them, so
// the memory stays within twice the largest record present plus the chunks
// in flight.
type readAhead struct {
	s      *stream
	minLen int // the shortest valid record: header and trailer
	chunks chan chunk
	free   chan []byte
	retry  chan struct{}
	quit   chan struct{}
	done   chan struct{}
}

// chunk is data of a volume from offset off.
type chunk struct {
	b   []byte
	off int64
	end bool  // b ends with the data present: a retry sends its tail again
	err error // reading after b failed
}

// aheadChunks bounds the chunks read ahead of the decoder.
const aheadChunks = 2

// chunkSize is the size of the chunks read ahead (more for a record that
// does not fit): smaller than the volume readers' window (minWindow), as
// several are in flight.
func chunkSize() int { return min(minWindow, 256<<10) }

// startReadAhead reads s from offset off; buf[r:w] holds the bytes already
// read from there, and buf becomes the goroutine's.
func startReadAhead(s *stream, minLen int, buf []byte, r, w int, off int64) *readAhead {
	a := &readAhead{
		s:      s,
		minLen: minLen,
		chunks: make(chan chunk, aheadChunks),
		free:   make(chan []byte, aheadChunks+2),
		retry:  make(chan struct{}),
		quit:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	if len(buf) < chunkSize() {
		nb := make([]byte, chunkSize())
		w = copy(nb, buf[r:w])
		buf = nb
	} else {
		w = copy(buf, buf[r:w])
	}
	aheadStarted.Add(1)
	go a.run(buf, w, off)
	return a
}

// stop ends the goroutine; its stream may then be closed.
func (a *readAhead) stop() {
	close(a.quit)
	<-a.done
}

// buffer returns a free buffer of at least n bytes.
func (a *readAhead) buffer(n int) []byte {
	select {
	case b := <-a.free:
		if len(b) >= n {
			return b
		}
	default:
	}
	return make([]byte, n)
}

// wholeRecords returns the length of the whole records at the start of b,
// and whether a record length out of range stopped the walk.
func (a *readAhead) wholeRecords(b []byte) (p int, bad bool) {
	for p+4 <= len(b) {
		n := int(int32(be32(b[p:])))
		if n < a.minLen || n > maxRecordSize-1 {
			return p, true
		}
		if n > len(b)-p {
			break
		}
		p += n
	}
	return p, false
}

func (a *readAhead) send(c chunk) bool {
	select {
	case a.chunks <- c:
		return true
	case <-a.quit:
		return false
	}
}

func (a *readAhead) run(buf []byte, w int, off int64) {
	defer close(a.done)
	for {
		var rerr error
		end := false
		for w < len(buf) {
			m, err := a.s.r.Read(buf[w:])
			w += m
			if err == io.EOF {
				end = true
				break
			}
			if err != nil {
				rerr = err
				break
			}
		}
		p, bad := a.wholeRecords(buf[:w])
		switch {
		case bad || rerr != nil:
			// the decoder reports it, where the records stop
			a.send(chunk{b: buf[:w], off: off, err: rerr})
			<-a.quit
			return
		case end:
			tail := append([]byte(nil), buf[p:w]...)
			if !a.send(chunk{b: buf[:w], off: off, end: true}) {
				return
			}
			select {
			case <-a.retry:
			case <-a.quit:
				return
			}
			buf = a.buffer(max(chunkSize(), 2*len(tail)))
			w, off = copy(buf, tail), off+int64(p)
		case p == 0:
			// full, and no whole record in it yet: a larger buffer
			nb := make([]byte, 2*len(buf))
			copy(nb, buf[:w])
			buf = nb
		default:
			nb := a.buffer(max(chunkSize(), 2*(w-p)))
			n := copy(nb, buf[p:w])
			if !a.send(chunk{b: buf[:p], off: off}) {
				return
			}
			buf, w, off = nb, n, off+int64(p)
		}
	}
}

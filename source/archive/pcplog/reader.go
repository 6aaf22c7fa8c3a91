package pcplog

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/pcp-exporter/pcp-exporter/internal/pcpwire"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// runsRefused counts the runs SkipRun found and did not pass over (tests).
var runsRefused atomic.Int64

// RunResult is what SkipRun did with the run at the position.
type RunResult int

const (
	RunNone     RunResult = iota // no run to try (too short, not sparse)
	RunAccepted                  // passed over up to its last record
	RunRefused                   // its last record was decoded and refused
)

// minWindow is the smallest read buffer of a volume (a variable for tests).
var minWindow = 1 << 20

// Record is one record of a data volume: a pmResult as logged, or a mark.
type Record struct {
	Time time.Time
	// Mark reports a <mark> record (numpmid 0): a gap in the recording.
	Mark bool
	// Sets holds one ValueSet per metric of the record, in file order. Err is
	// a semantics.PMError when the record holds an error code for the metric.
	Sets []source.ValueSet
	Vol  int   // volume number
	Off  int64 // byte offset of the record in its (uncompressed) volume
	// First is the record's first metric (0 for a mark), read even when
	// Only skips its set: the records of one pmlogger fetch group start
	// with the same metric (Follow's logging interval)
	First semantics.PMID
}

// volReader is a window over one volume file. Records are decoded in place.
type volReader struct {
	s    *stream
	num  int
	buf  []byte
	r, w int
	off  int64 // file offset of buf[r]
	eof  bool
	err  error
	// exact: a plain volume read record by record, never past the record
	// being read (no window ahead), so that Reader.SkipRun
	// can pass over records unread
	exact bool
	// a record of nextLen bytes (0: none known) starts at nextOff: an exact
	// read of it reads it whole at once
	nextOff int64
	nextLen int
}

// close closes the file.
func (v *volReader) close() error { return v.s.Close() }

// fill makes at least n bytes available at buf[r:]; false at the end of the
// data (or on a read error, kept in v.err). The buffer only grows while it is
// full of data, so its size stays within twice the data present.
func (v *volReader) fill(n int) bool {
	if v.exact {
		return v.fillExact(n)
	}
	for v.w-v.r < n {
		if v.eof || v.err != nil {
			return false
		}
		if v.r > 0 && len(v.buf)-v.r < n {
			copy(v.buf, v.buf[v.r:v.w])
			v.w -= v.r
			v.r = 0
		}
		if v.w == len(v.buf) {
			sz := 2 * len(v.buf)
			if sz < minWindow {
				sz = max(sz, v.firstWindow())
			}
			nb := make([]byte, sz)
			copy(nb, v.buf[v.r:v.w])
			v.w -= v.r
			v.r = 0
			v.buf = nb
		}
		m, err := v.s.r.Read(v.buf[v.w:])
		v.w += m
		if err == io.EOF {
			v.eof = true
		} else if err != nil {
			// a decompressor returns the last bytes it could with the
			// error: the whole records among them are read first
			v.err = &FormatError{File: v.s.path, Off: v.off + int64(v.w-v.r), Msg: "read: " + err.Error()}
		}
	}
	return true
}

// fillExact is fill reading no byte past buf[r+n]. The buffer doubles (from
// 4 KiB) only while full of data, or takes n bytes at once up to 1 MiB, so
// it stays within twice the largest record read (or 1 MiB).
func (v *volReader) fillExact(n int) bool {
	for v.w-v.r < n {
		if v.eof || v.err != nil {
			return false
		}
		if v.r > 0 {
			copy(v.buf, v.buf[v.r:v.w])
			v.w -= v.r
			v.r = 0
		}
		if v.w == len(v.buf) || len(v.buf) < min(n, 1<<20) {
			// a record up to 1 MiB gets its size at once, a larger one
			// doubles as its data comes
			nb := make([]byte, max(2*len(v.buf), 4<<10, min(n, 1<<20)))
			copy(nb, v.buf[:v.w])
			v.buf = nb
		}
		m, err := v.s.r.Read(v.buf[v.w:min(len(v.buf), n)])
		v.w += m
		if err == io.EOF || (m == 0 && err == nil) {
			v.eof = true
		} else if err != nil {
			v.err = &FormatError{File: v.s.path, Off: v.off + int64(v.w-v.r), Msg: "read: " + err.Error()}
		}
	}
	return true
}

// firstWindow is the size of a buffer growing up to minWindow: a plain
// file's data left when it is less (the end of the data, from an index
// entry near it), minWindow otherwise. The buffer doubles from there if the
// file grows.
func (v *volReader) firstWindow() int {
	if v.s.plain {
		if fi, err := v.s.f.Stat(); err == nil {
			if left := fi.Size() - v.off - int64(v.w-v.r); left < int64(minWindow) {
				return int(max(left, 1))
			}
		}
	}
	return minWindow
}

// skip discards n bytes (a seek in a compressed stream, or in a plain file).
func (v *volReader) skip(n int64) error {
	if v.s.plain {
		v.off += n
		if _, err := v.s.f.Seek(v.off, io.SeekStart); err != nil {
			return err
		}
		v.r, v.w = 0, 0
		v.eof = false
		return nil
	}
	for n > 0 {
		if v.w == v.r && !v.fill(1) {
			if v.err != nil {
				return v.err
			}
			return io.ErrUnexpectedEOF
		}
		k := int64(v.w - v.r)
		if k > n {
			k = n
		}
		v.r += int(k)
		v.off += k
		n -= k
	}
	return nil
}

// Reader iterates over the records of an archive, volume after volume.
type Reader struct {
	a       *Archive
	version int
	vi      int   // index of the current volume in the volume list
	start   int64 // offset to seek to in the first volume opened
	vol     *volReader
	own     RecordBuffer
	out     *RecordBuffer // where records are decoded: own, or a prefetch slot
	types   []typeCache
	errs    pcpwire.Errors
	err     error
	closed  bool
	hdrSize int
	// setBytes: the value set being decoded has byte payloads
	setBytes bool
	keep     func(semantics.PMID) bool // nil: every metric (see Only)
	keeps    []keepCache
	// the set offsets of the last record visited set by set (restricted
	// readers): layout[i] is set i's, layout[layN] the end of the sets
	layout []int32
	layN   int
	// layWant[i]: the first 8 bytes of set i there (metric, value count)
	layWant []uint64
	keptAt  []int32 // positions of the kept sets in that record
	// tests: walkAll visits every set of every record; fastVisits counts
	// the records visited at their kept sets only
	walkAll    bool
	fastVisits int
	// sparse: plain volumes are read record by record (see SkipRun);
	// pending: the record SkipRun decoded is the one Next returns
	sparse  bool
	pending bool
	// no SkipRun before this offset of this volume (a run refused)
	noSkipVol int
	noSkipEnd int64
	hbuf      []byte // SkipRun's heads
	tails     *Tails // reading the runs' ends ahead (nil: none)
	// interp: value blocks are read as libpcp's interpolation reads them
	// (a replay's readers), their own type byte and length unchecked;
	// otherwise as pmExtractValue reads them (see ErrValueBlock)
	interp bool
}

type typeCache struct {
	pmid  semantics.PMID
	typ   semantics.Type
	valid bool
}

// Next advances to the next record. It returns false at the end of the
// archive (a truncated last record counts as the end) or on an error (see
// Err). At the end of the last volume the position is kept: after the file
// grew (and Refresh found new metadata or volumes), Next continues there.
func (r *Reader) Next() bool {
	if r.err != nil || r.closed {
		return false
	}
	if r.pending {
		r.pending = false
		return true
	}
	for {
		if r.vol == nil {
			st := r.a.state()
			if r.vi >= len(st.vols) {
				return false
			}
			if err := r.open(st.vols[r.vi]); err != nil {
				r.err = err
				return false
			}
		}
		ok, err := r.read()
		if err != nil {
			r.err = err
			return false
		}
		if ok {
			return true
		}
		// end of this volume
		st := r.a.state()
		if r.vi+1 < len(st.vols) {
			r.vol.close()
			r.vol = nil
			r.vi++
			r.start = 0
			continue
		}
		r.vol.eof = false // retry later: the writer may append
		return false
	}
}

func (r *Reader) open(vf volumeFile) error {
	s, err := r.a.openVolume(vf.path)
	if err != nil {
		return err
	}
	lsz := LabelSize(r.version)
	// the label alone first: a reader that only checks it (Open) or
	// seeks near the end (End) reads no more
	v := &volReader{s: s, num: vf.num, buf: make([]byte, lsz), exact: r.sparse && s.plain}
	r.vol = v
	if !v.fill(lsz) {
		if v.err != nil {
			return v.err
		}
		return &FormatError{File: vf.path, Off: int64(v.w - v.r), Msg: "truncated label"}
	}
	l, err := ParseLabel(vf.path, v.buf[v.r:v.w])
	if err != nil {
		return err
	}
	if err := r.a.checkLabel(vf.path, l, int32(vf.num)); err != nil {
		return err
	}
	// the window is sized at the first read of records (see firstWindow)
	v.buf, v.r, v.w = nil, 0, 0
	v.off = int64(lsz)
	if r.start > int64(lsz) {
		if err := v.skip(r.start - int64(lsz)); err != nil {
			return fmt.Errorf("%s: seek to %d: %w", vf.path, r.start, err)
		}
	}
	return nil
}

// read decodes the next record of the current volume; false at its end.
func (r *Reader) read() (bool, error) {
	v := r.vol
	if v.exact && v.nextLen > 4 && v.nextOff == v.off && v.w == v.r {
		// known records at once: what is there of them (the last one may
		// still be being written), the checks below as for any read
		v.fill(v.nextLen)
	}
	v.nextLen = 0
	if !v.fill(4) {
		r.noteCut()
		return false, v.err
	}
	n := int(int32(be32(v.buf[v.r:])))
	if n == 0 && r.zeroTail() {
		// only zeros where a record should start: the zero-filled tail a
		// crashed pmlogger (or the file system under it) leaves. libpcp
		// reads every record before it and no further (PM_ERR_LOGREC
		// there); so do Readers: the end of the data, reported by
		// Truncated (an archive being written that grows past the zeros
		// is not read past them either).
		r.noteZeros()
		return false, nil
	}
	if n < r.hdrSize+4 || n > MaxRecordSize-1 {
		return false, &FormatError{File: v.s.path, Off: v.off, Msg: fmt.Sprintf("record length %d out of range", n)}
	}
	if !v.fill(n) {
		r.noteCut()
		return false, v.err // truncated last record: the end
	}
	rec := v.buf[v.r : v.r+n]
	off := v.off
	v.r += n
	v.off += int64(n)
	if err := r.decode(rec, off); err != nil {
		return false, err
	}
	if r.out != &r.own {
		r.out.detach() // kept beyond the next read (a prefetch slot)
	}
	return true, nil
}

// noteCut records, for a finished archive, the partial record at the end
// of the volume the reader just found (see Archive.Truncated).
func (r *Reader) noteCut() {
	v := r.vol
	if r.a.live || v.err != nil || v.w <= v.r || r.a.cut.Load() != nil {
		return
	}
	r.a.cut.CompareAndSwap(nil, &FormatError{File: v.s.path, Off: v.off, Msg: cutMsg("data", v.buf[v.r:v.w])})
}

// zeroCheck is how far past a zero record length the volume must hold only
// zeros (or end) to be taken for a zero-filled tail.
const zeroCheck = 64 << 10

// zeroTail reports whether the volume holds only zeros from the position
// to its end, or for zeroCheck bytes: a zero-filled tail, not a corrupt
// record length followed by data.
func (r *Reader) zeroTail() bool {
	v := r.vol
	v.fill(zeroCheck)
	for _, b := range v.buf[v.r:v.w] {
		if b != 0 {
			return false
		}
	}
	return true
}

// noteZeros records, for a finished archive or one being written, the
// zeros at the position of the volume the reader reads (see Truncated).
func (r *Reader) noteZeros() {
	v := r.vol
	if r.a.cut.Load() != nil {
		return
	}
	r.a.cut.CompareAndSwap(nil, &FormatError{File: v.s.path, Off: v.off, Msg: "zeros where a record should start (a crashed pmlogger's tail?): the records before them are read, none after"})
}

// SetInterp sets whether value blocks are read as libpcp's interpolation
// reads them (a replay's readers: their own type byte and length
// unchecked) or as pmExtractValue reads them (see ErrValueBlock).
func (r *Reader) SetInterp(on bool) { r.interp = on }

// ReadAheadWith has SkipRun use what t read ahead (nil: nothing).
func (r *Reader) ReadAheadWith(t *Tails) { r.tails = t }

// DecodeInto has the records Next returns decoded into b (nil: the
// reader's own buffer).
func (r *Reader) DecodeInto(b *RecordBuffer) { r.out = b }

// SeekVolume positions a Reader that has not started at offset off of
// volume number vol (the offset of a whole record); false if the archive
// has no such volume.
func (r *Reader) SeekVolume(vol int, off int64) bool {
	for vi, v := range r.a.state().vols {
		if v.num == vol {
			r.vi, r.start = vi, off
			return true
		}
	}
	return false
}

// SetSparse sets whether plain volumes are read record by record (see
// SkipRun), from the position on.
func (r *Reader) SetSparse(on bool) {
	r.sparse = on
	if r.vol != nil {
		r.vol.exact = on && r.vol.s.plain
	}
}

// SkipRun passes over records at the position without reading them, for a
// sparse replay (see Replay.front). The run is the records from the
// position that hold values (no <mark>) at or before tReq, in time order
// from after (never going back), none at tReq but the last one, j. Only
// their headers and trailers are read (see heads): lengths in range and
// equal, numpmid fitting in the record. A run of at least minRun records
// has j decoded, and when ok(j) says that applying j alone changes the
// replay as applying the whole run would (and what came before it from
// after: the caller's), the run is accepted: the records before j are
// passed over and the next call to Next returns j. SkipRun returns the
// number passed over and the time of the first one. It accepts nothing
// when the run is too short, when ok refuses j (the run is then read as
// usual, and no run is tried again before j's end), or when the reader
// does not read a plain volume record by record. An error is j's (the
// records before it are not decoded: a value set corrupt inside one of
// them goes unnoticed).
func (r *Reader) SkipRun(secs func(time.Time) float64, tReq, after float64, minRun int, ok func(*Record) bool) (n int, tFirst float64, res RunResult, err error) {
	v := r.vol
	if r.err != nil || r.closed || r.pending || v == nil || !v.exact || v.err != nil || v.w != v.r {
		return 0, 0, RunNone, nil
	}
	if v.num == r.noSkipVol && v.off < r.noSkipEnd {
		return 0, 0, RunNone, nil
	}
	hl := r.hdrSize // length, timestamp and numpmid
	first := v.off
	hs := heads{f: v.s.f, hl: hl, b: r.headBuf(hl)}
	if r.tails != nil {
		hs.pre = r.tails.heads(v.s.f, first)
	}
	pos, last := first, after
	// nextLen: the length in the header of the record at pos (0: not
	// read whole), for reading it at once
	jLen, nextLen := 0, 0
	for {
		e := hs.at(pos)
		if e.end {
			break
		}
		l, np := int(e.len), int(e.np)
		nextLen = l
		if l < hl+4 || l > MaxRecordSize-1 || np <= 0 || np > (l-hl-4)/8 {
			break // a mark, or what the decoding reports
		}
		var t float64
		if r.version == 3 {
			t = secs(TimeV3(e.tb[:]))
		} else {
			t = secs(TimeV2(e.tb[:]))
		}
		if t > tReq || t < last {
			break
		}
		if !e.trailer {
			nextLen = 0
			break // cut short (the end of the data), or a bad trailer
		}
		if n == 0 {
			tFirst = t
		}
		n, jLen, last = n+1, l, t
		pos += int64(l)
		nextLen = 0
		if t == tReq {
			if e := hs.at(pos); !e.end {
				nextLen = int(e.len)
			}
			break
		}
	}
	if n < minRun {
		return 0, 0, RunNone, nil
	}
	j := pos - int64(jLen)
	if nextLen < hl+4 || nextLen > MaxRecordSize-1 {
		nextLen = 0
	}
	// j and the record after it (the next one read) in one read, unless
	// that one is large (its length is not checked yet)
	want := jLen
	if nextLen <= 1<<20 {
		want += nextLen
	}
	if err := v.skip(j - v.off); err != nil {
		r.err = &FormatError{File: v.s.path, Off: j, Msg: "seek: " + err.Error()}
		return 0, 0, RunNone, r.err
	}
	if r.tails != nil {
		if b := r.tails.take(v.s.f, hl, first, j, jLen, want); b != nil {
			// read ahead (see tails): the file goes on after them
			k := min(len(b), want)
			if _, err := v.s.f.Seek(j+int64(k), io.SeekStart); err != nil {
				r.err = &FormatError{File: v.s.path, Off: j, Msg: "seek: " + err.Error()}
				return 0, 0, RunNone, r.err
			}
			r.tails.swapped(v.buf)
			v.buf, v.w = b[:cap(b)], k
		}
	}
	v.nextOff, v.nextLen = j, want
	got, err := r.read()
	if err != nil {
		r.err = err
		return 0, 0, RunNone, err
	}
	if got && ok(r.Record()) {
		r.pending = true
		v.nextOff, v.nextLen = pos, nextLen
		return n - 1, tFirst, RunAccepted, nil
	}
	if err := v.skip(first - v.off); err != nil {
		r.err = &FormatError{File: v.s.path, Off: first, Msg: "seek: " + err.Error()}
		return 0, 0, RunNone, r.err
	}
	r.noSkipVol, r.noSkipEnd = v.num, pos
	runsRefused.Add(1)
	return 0, 0, RunRefused, nil
}

// headBuf returns the reader's buffer for heads: a trailer and a header.
func (r *Reader) headBuf(hl int) []byte {
	if cap(r.hbuf) < hl+4 {
		r.hbuf = make([]byte, hl+4)
	}
	return r.hbuf[:hl+4]
}

// recHead is what SkipRun reads of a record: its header (length, numpmid,
// timestamp) and whether its trailer repeats the length; end: no whole
// header at off (the end of the data).
type recHead struct {
	len     int32
	np      int32
	tb      [12]byte // the timestamp (v2: 8 bytes, v3: 12)
	trailer bool     // the trailer was read and equals len
	end     bool
}

// heads reads the heads of consecutive records of a plain volume: a
// record's trailer and the header of the record after it in one read.
type heads struct {
	f    *os.File
	hl   int
	b    []byte // hl+4 bytes: a trailer, then a header
	next int64  // b[4:] holds the header at next (when have)
	have bool
	pre  []placedHead // heads read ahead, in file order (see tails)
}

// at returns the head of the record at off.
func (h *heads) at(off int64) recHead {
	for len(h.pre) > 0 && h.pre[0].off < off {
		h.pre = h.pre[1:]
	}
	if len(h.pre) > 0 && h.pre[0].off == off && h.pre[0].h.trailer {
		h.have = false
		return h.pre[0].h
	}
	hl := h.hl
	if !h.have || h.next != off {
		if k, _ := h.f.ReadAt(h.b[4:], off); k < hl {
			h.have = false
			return recHead{end: true}
		}
	}
	h.have = false
	e := recHead{len: int32(be32(h.b[4:])), np: int32(be32(h.b[hl:]))}
	copy(e.tb[:], h.b[8:hl])
	l := int(e.len)
	if l < hl+4 || l > MaxRecordSize-1 {
		return e
	}
	k, _ := h.f.ReadAt(h.b, off+int64(l)-4)
	e.trailer = k >= 4 && int(int32(be32(h.b))) == l
	if e.trailer && k == len(h.b) {
		h.next, h.have = off+int64(l), true
	}
	return e
}

func (r *Reader) ferr(off int64, format string, args ...any) error {
	return &FormatError{File: r.vol.s.path, Off: off, Msg: fmt.Sprintf(format, args...)}
}

func (r *Reader) decode(rec []byte, off int64) error {
	n := len(rec)
	if t := int(int32(be32(rec[n-4:]))); t != n {
		return r.ferr(off+int64(n)-4, "record trailer length %d != header %d", t, n)
	}
	if r.out == nil {
		r.out = &r.own
	}
	rb := r.out
	rb.bytes = false
	rb.byteSets = rb.byteSets[:0]
	out := &rb.rec
	out.Vol = r.vol.num
	out.Off = off
	var p int
	if r.version == 3 {
		out.Time = TimeV3(rec[4:])
		p = 16
	} else {
		out.Time = TimeV2(rec[4:])
		p = 12
	}
	end := n - 4
	np := int32(be32(rec[p:]))
	p += 4
	out.Sets = out.Sets[:0]
	out.Mark = np == 0
	out.First = 0
	if np == 0 {
		return nil
	}
	if np < 0 || int(np) > (end-p)/8 {
		return r.ferr(off+int64(p)-4, "numpmid %d does not fit in the %d-byte record", np, n)
	}
	out.First = semantics.PMID(be32(rec[p:]))
	d := pcpwire.NewDecoder(rec[:end], off, "record")
	d.Skip(p)
	bl := pcpwire.Blocks{Shift: -8, Lo: r.hdrSize}
	var vs pcpwire.ValueSet
	m := r.a.state().meta
	vals := rb.vals[:0]
	starts := rb.starts[:0]
	if cap(out.Sets) < int(np) && r.keep == nil {
		out.Sets = make([]source.ValueSet, 0, np)
	}
	if len(r.types) < int(np) {
		r.types = append(r.types, make([]typeCache, int(np)-len(r.types))...)
	}
	if r.keep != nil && len(r.keeps) < int(np) {
		r.keeps = append(r.keeps, make([]keepCache, int(np)-len(r.keeps))...)
	}
	// Restricted to some metrics, a record laid out as the previous one
	// (checked: see sameLayout) is visited at the kept sets only.
	fast := r.keep != nil && !r.walkAll && r.sameLayout(rec[:end], int(np))
	visits := int(np)
	if fast {
		visits = len(r.keptAt)
		r.fastVisits++
	} else if r.keep != nil {
		r.layN = -1 // recorded below, once the record is known to be whole
		r.layout = r.layout[:0]
		r.layWant = r.layWant[:0]
	}
	for j := 0; j < visits; j++ {
		i := j
		if fast {
			// the head pcpwire read at this offset of the last record,
			// which sameLayout proved this one repeats (so the set ends
			// where it ended): only the value format and the pairs are
			// read, without pcpwire's Seek and ValueSet calls per kept
			// set (they made decode 27% of backfill's CPU, not 24%)
			i = int(r.keptAt[j])
			o, h := int(r.layout[i]), r.layWant[i]
			vs = pcpwire.ValueSet{PMID: semantics.PMID(h >> 32), NumVal: int32(h)}
			if vs.NumVal > 0 {
				vs.ValFmt, vs.PairsAt = be32(rec[o+8:]), o+12
				vs.Pairs = rec[o+12 : r.layout[i+1]]
			}
		} else {
			if r.keep != nil {
				p = d.Pos()
				r.layout = append(r.layout, int32(p))
				if end-p >= 8 {
					r.layWant = append(r.layWant, binary.BigEndian.Uint64(rec[p:]))
				}
			}
			d.ValueSet(&vs, i, int(np))
			if d.Err() != nil {
				return r.wireErr(d.Err())
			}
		}
		pmid, numval := vs.PMID, vs.NumVal
		if r.keep != nil {
			// records repeat their layout: the metric at this position
			// was asked about before, most of the time
			k := &r.keeps[i]
			if !k.valid || k.pmid != pmid {
				*k = keepCache{pmid: pmid, keep: r.keep(pmid), valid: true}
			}
			if !k.keep { // not wanted: skipped undecoded (ValueSet checked it)
				continue
			}
		}
		set := source.ValueSet{PMID: pmid}
		starts = append(starts, len(vals))
		if numval < 0 {
			set.Err = r.errs.Of(numval)
			out.Sets = append(out.Sets, set)
			continue
		}
		if numval == 0 {
			out.Sets = append(out.Sets, set)
			continue
		}
		valfmt := vs.ValFmt
		set.ValFmt = uint8(valfmt) // checked below
		tc := &r.types[i]
		typ := tc.typ
		if !tc.valid || tc.pmid != pmid || typ == -2 {
			typ = -2 // unknown: use each block's own type
			if mi := m.descs[pmid]; mi != nil {
				typ = mi.desc.Type
			}
			*tc = typeCache{pmid, typ, true}
		}
		// grow the value store once per set, then fill it in place
		nv := int(numval)
		base := len(vals)
		if cap(vals)-base < nv {
			nvals := make([]source.InstValue, base, 2*cap(vals)+nv)
			copy(nvals, vals)
			vals = nvals
		}
		vals = vals[:base+nv]
		dst := vals[base:]
		if typ != -2 && !EncodingFits(valfmt, typ) {
			// libpcp refuses the values (see ErrEncoding)
			vals = vals[:base]
			set.Err = ErrEncoding
			out.Sets = append(out.Sets, set)
			continue
		}
		switch valfmt {
		case semantics.ValInsitu:
			pcpwire.Insitu(dst, vs.Pairs, typ)
		case semantics.ValDptr, semantics.ValSptr:
			r.setBytes = false
			if err := r.decodeBlocks(dst, &d, &vs, &bl, typ); err == errRefused {
				vals = vals[:base]
				set.Err = ErrValueBlock
				out.Sets = append(out.Sets, set)
				continue
			} else if err != nil {
				return err
			}
			if r.setBytes {
				rb.byteSets = append(rb.byteSets, len(out.Sets))
			}
		default:
			return r.ferr(off+int64(vs.PairsAt)-4, "unknown value format %d of %s", valfmt, pmid)
		}
		out.Sets = append(out.Sets, set)
	}
	if r.keep != nil && !fast {
		r.layout = append(r.layout, int32(d.Pos()))
		r.layN = int(np)
		r.keptAt = r.keptAt[:0]
		for i := 0; i < int(np); i++ {
			if r.keeps[i].keep {
				r.keptAt = append(r.keptAt, int32(i))
			}
		}
	}
	for i := range out.Sets {
		e := len(vals)
		if i+1 < len(starts) {
			e = starts[i+1]
		}
		out.Sets[i].Values = vals[starts[i]:e:e]
	}
	rb.vals = vals
	rb.starts = starts
	return nil
}

// sameLayout reports whether the np value sets of rec (the record without
// its trailer) start where those of the last record fully visited did,
// with the same metrics and value counts: the first 8 bytes of each set
// (metric, value count) are read at its remembered offset and must be the
// remembered ones. The first set starts where it must (after the header of
// the version), and a set of the same value count ends where it ended, so
// each set is then proven to be where it is expected. Every step is
// checked against a known answer instead of depending on the step before,
// so the checks run in parallel in the processor.
func (r *Reader) sameLayout(rec []byte, np int) bool {
	if np != r.layN || len(r.layout) != np+1 || len(r.layWant) != np || int(r.layout[np]) > len(rec) {
		return false
	}
	lay := r.layout[:np]
	want := r.layWant[:np]
	var diff uint64
	for i, o := range lay {
		diff |= binary.BigEndian.Uint64(rec[o:]) ^ want[i]
	}
	return diff == 0
}

// decodeBlocks decodes the {inst, pointer} pairs of vs, whose values are
// pmValueBlocks of the record body d decodes (the record without its
// trailer), located by bl (not Ordered). Block's checks are made inline,
// as pcpwire's Values makes them (a call per value costs BenchmarkDecode
// 8-26%); a block they refuse is given to Block, which tells why.
func (r *Reader) decodeBlocks(dst []source.InstValue, d *pcpwire.Decoder, vs *pcpwire.ValueSet, bl *pcpwire.Blocks, typ semantics.Type) error {
	rec, off, pmid := d.Buf(), r.out.rec.Off, vs.PMID
	// copied once, so that the loop does not load them from vs and bl
	// again at each value
	pairs, shift, lo := vs.Pairs[:8*len(dst)], bl.Shift, bl.Lo
	for j := range dst {
		w := pairs[8*j : 8*j+8]
		bo := int(be32(w[4:]))*4 + shift
		if bo < lo || bo > len(rec)-4 {
			d.Block(vs, j, bl)
			return r.wireErr(d.Err())
		}
		b := rec[bo:]
		hdr := be32(b)
		vlen := int(hdr & 0xffffff)
		if vlen < 4 || vlen > len(b) {
			d.Block(vs, j, bl)
			return r.wireErr(d.Err())
		}
		payload := b[4:vlen]
		t := typ
		if t == -2 {
			t = semantics.Type(hdr >> 24)
		} else if !BlockFits(hdr, t) {
			if !r.interp {
				return errRefused // libpcp's pmExtractValue: PM_ERR_CONV
			}
			// libpcp's interpolation reads a number's bytes whatever
			// the block says of its type and length
			if n := NumberSize(t); n > 0 && 4+n <= len(b) {
				payload = b[4 : 4+n]
			}
		}
		v := &dst[j]
		v.Inst = int32(be32(w))
		switch {
		case (t == semantics.TypeU64 || t == semantics.Type64 || t == semantics.TypeDouble) && len(payload) >= 8:
			v.Value.SetNumeric(t, binary.BigEndian.Uint64(payload))
		default:
			val, ok := semantics.BlockValue(t, payload)
			if !ok {
				return r.ferr(off+int64(bo), "value block of %d bytes too short for type %s of %s", vlen-4, t, pmid)
			}
			v.Value = val
			if !t.IsNumeric() {
				r.out.bytes = true
				r.setBytes = true
			}
		}
	}
	return nil
}

// wireErr turns a decoding error of the record (a *pcpwire.Error) into a
// FormatError of the volume.
func (r *Reader) wireErr(err error) error {
	if we, ok := err.(*pcpwire.Error); ok {
		return &FormatError{File: r.vol.s.path, Off: we.Offset, Msg: we.Msg}
	}
	return err
}

// Record returns the current record, valid until the next call to Next.
func (r *Reader) Record() *Record {
	if r.out == nil {
		r.out = &r.own
	}
	return &r.out.rec
}

// RecordBuffer is a decoded record and the storage it refers to: its value sets,
// their values, and (once detached) the bytes of its string and aggregate
// values, which otherwise point into the volume buffer.
type RecordBuffer struct {
	rec    Record
	vals   []source.InstValue
	starts []int
	buf    []byte
	bytes  bool // some value of rec has a byte payload
	// byteSets are the positions in rec.Sets of the sets with such values
	byteSets []int
}

// Record returns the record b holds.
func (b *RecordBuffer) Record() *Record { return &b.rec }

// Hold copies rec, a record without values (a mark), into b, and returns
// b's copy.
func (b *RecordBuffer) Hold(rec *Record) *Record {
	b.rec, b.bytes, b.byteSets = *rec, false, b.byteSets[:0]
	return &b.rec
}

// detach copies the byte payloads of the record into b.buf, so that the
// record stays valid while the reader goes on.
func (b *RecordBuffer) detach() {
	if !b.bytes {
		return
	}
	n := 0
	for _, i := range b.byteSets {
		for _, v := range b.rec.Sets[i].Values {
			if !v.Value.Type().IsNumeric() {
				n += len(v.Value.Bytes())
			}
		}
	}
	if n == 0 {
		return
	}
	if cap(b.buf) < n {
		b.buf = make([]byte, 0, n)
	}
	buf := b.buf[:0]
	for _, i := range b.byteSets {
		s := &b.rec.Sets[i]
		for j := range s.Values {
			v := &s.Values[j].Value
			if t := v.Type(); !t.IsNumeric() && len(v.Bytes()) > 0 {
				k := len(buf)
				buf = append(buf, v.Bytes()...)
				v.SetBytes(t, buf[k:len(buf):len(buf)])
			}
		}
	}
	b.buf = buf
}

// Err returns the error that stopped iteration, nil at a clean end.
func (r *Reader) Err() error { return r.err }

// Close releases the open volume.
func (r *Reader) Close() error {
	r.closed = true
	if r.vol != nil {
		err := r.vol.close()
		r.vol = nil
		return err
	}
	return nil
}

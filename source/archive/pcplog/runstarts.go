package pcplog

import (
	"sort"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
)

// Generations: when the counters an archive recorded started, as far as the
// recording tells (source.Generations). pmlogger starts its counters' run
// when it starts: the archive's label start. A <mark> record is libpcp's
// discontinuity (pmlogger stopped, or the archives of a merge or of a
// multi-archive context do not join): after it the counters may have
// restarted, so a new run starts at the mark's time. That is the start of
// the observation, as OpenTelemetry SDKs give their observable counters
// the time their collection began; the counter itself may be older (a
// kernel counter counts from boot), and a reset in between shows as a
// value that goes down (bridge.CounterStart).

// RunStarts answers, for a time of a timeline of archives, when the
// recording run in force then began: the label start of the last archive
// that starts at or before it, or the time of the last <mark> of that
// archive at or before it, or, past its last record when another archive
// follows, the mark libpcp puts between the two (1 ms after the last
// record, as __pmLogGenerateMark does), whichever is latest. Each archive's
// records are read (their framing only) as far as the times asked.
type RunStarts struct {
	archives []*Archive // by start time
	scans    []markScan
}

// markScan reads one archive's records for its marks.
type markScan struct {
	rd    *Reader
	marks []time.Time // in file order
	last  time.Time   // the last record read
	atEnd bool        // no record after last (so far: the file may grow)
}

// NewRunStarts answers for archives, sorted by start time.
func NewRunStarts(archives []*Archive) *RunStarts {
	return &RunStarts{archives: archives, scans: make([]markScan, len(archives))}
}

// At returns the start of the run in force at t (zero before the first
// archive's start).
func (r *RunStarts) At(t time.Time) time.Time {
	i := sort.Search(len(r.archives), func(i int) bool { return r.archives[i].Label().Start.After(t) }) - 1
	if i < 0 {
		return time.Time{}
	}
	g := r.archives[i].Label().Start
	s := &r.scans[i]
	s.readTo(r.archives[i], t)
	if j := sort.Search(len(s.marks), func(j int) bool { return s.marks[j].After(t) }) - 1; j >= 0 && s.marks[j].After(g) {
		g = s.marks[j]
	}
	if i+1 < len(r.archives) && s.atEnd && !s.last.IsZero() {
		if m := s.last.Add(time.Millisecond); !m.After(t) && m.After(g) {
			g = m
		}
	}
	return g
}

// readTo reads a's records up to the first one after t (or the end).
func (s *markScan) readTo(a *Archive, t time.Time) {
	if s.rd == nil {
		s.rd = a.Records()
		s.rd.Only(func(semantics.PMID) bool { return false })
	}
	if s.last.After(t) && !s.atEnd {
		return
	}
	s.atEnd = false
	for {
		if !s.rd.Next() {
			s.atEnd = true // or a read error: the replay reports it
			return
		}
		rec := s.rd.Record()
		if rec.Mark {
			s.marks = append(s.marks, rec.Time)
		}
		s.last = rec.Time
		if rec.Time.After(t) {
			return
		}
	}
}

// Close releases the readers.
func (r *RunStarts) Close() {
	for i := range r.scans {
		if r.scans[i].rd != nil {
			r.scans[i].rd.Close()
		}
	}
}

// RunStart returns when the recording run in force at t began in a
// timeline of archives (the start of the archive holding t, or its last
// <mark> at or before t: see Replay.Generation), reading the archives'
// record framing up to t.
func RunStart(archives []*Archive, t time.Time) time.Time {
	as := append([]*Archive(nil), archives...)
	sort.SliceStable(as, func(i, j int) bool { return as[i].Label().Start.Before(as[j].Label().Start) })
	r := NewRunStarts(as)
	defer r.Close()
	return r.At(t)
}

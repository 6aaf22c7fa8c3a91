package archive

import (
	"sort"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
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

// runStarts answers, for a time of a timeline of archives, when the
// recording run in force then began: the label start of the last archive
// that starts at or before it, or the time of the last <mark> of that
// archive at or before it, or, past its last record when another archive
// follows, the mark libpcp puts between the two (1 ms after the last
// record, as __pmLogGenerateMark does), whichever is latest. Each archive's
// records are read (their framing only) as far as the times asked.
type runStarts struct {
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

func newRunStarts(archives []*Archive) *runStarts {
	return &runStarts{archives: archives, scans: make([]markScan, len(archives))}
}

// at returns the start of the run in force at t (zero before the first
// archive's start).
func (r *runStarts) at(t time.Time) time.Time {
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

func (r *runStarts) close() {
	for i := range r.scans {
		if r.scans[i].rd != nil {
			r.scans[i].rd.Close()
		}
	}
}

// Generation returns when the counters of the recording run in force at
// the time of the last fetch started (source.Generations): the start of the
// archive holding it or its last <mark> at or before it (see runStarts);
// zero before any fetch.
func (r *Replay) Generation(semantics.PMID) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.fetched {
		return time.Time{}
	}
	if r.runs == nil {
		r.runs = newRunStarts(r.archives)
	}
	return r.runs.at(r.served)
}

// Generation returns the start of the followed run (source.Generations):
// the label start of the first archive followed. It stays when pmlogger
// starts a new archive, since Follow bridges the rotation with the latest
// values and the series go on (pmlogger_daily's rotation does not reset
// a counter). After a restart of pmlogger, or of pmcd and its agents, the
// archive alone cannot tell whether the counters restarted (a kernel
// counter goes on; an agent's own may start over): a counter that did
// restart shows as a value that goes down, which starts its series anew
// (bridge.CounterStart); one that restarted and passed its old value
// before the first record is not seen, as in Prometheus. Zero until an
// archive is followed.
func (f *Follow) Generation(semantics.PMID) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runStart
}

var (
	_ source.Generations = (*Replay)(nil)
	_ source.Generations = (*Follow)(nil)
)

// RunStart returns when the recording run in force at t began in a
// timeline of archives (the start of the archive holding t, or its last
// <mark> at or before t: see Replay.Generation), reading the archives'
// record framing up to t.
func RunStart(archives []*Archive, t time.Time) time.Time {
	as := append([]*Archive(nil), archives...)
	sort.SliceStable(as, func(i, j int) bool { return as[i].Label().Start.Before(as[j].Label().Start) })
	r := newRunStarts(as)
	defer r.close()
	return r.at(t)
}

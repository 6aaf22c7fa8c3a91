package archive

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

// Follow mode: serving the present of an archive pmlogger is writing.

const (
	// FollowMargin is what the default delay of a Follow adds to the
	// logging interval: pmlogger (PCP 6.0.3) writes each record within
	// 0.25 s of its timestamp (measured on this project's CI machine at
	// 1 s intervals, the volume's size sampled every 50-100 ms: 0.005-0.247
	// s over 65 records, 0.004-0.228 s over 46 at a load average of 12),
	// so a record is in the file 1 s after its time with room to spare.
	FollowMargin = time.Second
	// StallIntervals and StallMargin: a followed archive is stalled when
	// no record was added for StallIntervals logging intervals plus
	// StallMargin.
	StallIntervals = 3
	StallMargin    = 2 * time.Second
	// defaultInterval stands for the logging interval of an archive that
	// has not shown two records yet: pmlogger's default.
	defaultInterval = time.Minute
)

// FollowOptions configures a Follow.
type FollowOptions struct {
	// Delay is how far behind the wall clock the served time is; 0 is
	// one logging interval plus FollowMargin, so that the record after the
	// served time is normally written already and counters interpolate.
	Delay  time.Duration
	Interp semantics.InterpRule
}

// Follow is a source.Source over an archive pmlogger is writing, or over a
// pmlogger directory (the archive it writes now: see Newest). Fetch(now)
// answers the values interpolated, with libpcp's rules, at now minus the
// delay (truncated to the microsecond); where the archive has not reached
// that time, the values at its end. The Result's Time is the archive time
// served. A metric with no interpolated value at the served time (past its
// last observation: the end of the archive, pmlogger's closing record, a
// slower logging group; before its first one in a new archive) is served
// with its latest values recorded at or before that time. When pmlogger
// starts a new archive in the directory (pmlogger_daily, a restart),
// Follow moves to it once the served time reaches its start, the latest
// values of the archive before bridging the gap, so counters go on without
// a gap or a reset.
//
// It implements source.Monitored: missing while the path names no
// archive, stalled when no record was added for StallIntervals logging
// intervals plus StallMargin (from the volume's last write as this host's
// clock saw it, so a remote pmlogger's clock does not matter), and the lag
// of the served time behind the wall clock. A missing path is looked for
// again at every read.
type Follow struct {
	path string
	opts FollowOptions

	// runStart is the first followed archive's start (Generation)
	runStart time.Time

	mu      sync.Mutex
	starts  map[string]time.Time // label starts of a directory's archives
	cur     *Replay
	curBase string
	tail    *pcplog.Reader // cur's records' framing, read as they come
	// the logging interval estimate: each fetch group's last record time
	// (a group's records start with the same metric) and the last steps
	// of the groups
	groupLast map[semantics.PMID]time.Time
	steps     []time.Duration
	prev      *Replay // the archive before cur, for its instances
	// metaSize is the size of cur's .meta when its metrics were last
	// compared with the replay's
	metaSize int64
	epoch    uint64
	missing  error // why there is nothing to follow
	// end is cur's last record time; grown the wall time it last
	// advanced; polled the time of the last read of the tail
	end, grown, polled time.Time
	interval           time.Duration // logging interval (0: not known yet)
	served             time.Time     // the archive time of the last fetch
	lag                time.Duration
	// the latest recorded values of the fetched metrics at the served
	// time: vals reads cur's records of the metrics in valsFor, records
	// past the served time wait in pending
	vals      *pcplog.Reader
	valsPMIDs []semantics.PMID
	valsFor   map[semantics.PMID]bool
	pending   []pendingRecord
	npend     int
	kept      map[semantics.PMID][]source.InstValue
}

// pendingRecord is a record read ahead of the served time (its value sets
// copied, their slices reused).
type pendingRecord struct {
	t    time.Time
	sets []source.ValueSet
}

// NewFollow follows the archive or pmlogger directory at path. A path that
// names nothing yet is no error: Status says it is missing until it
// appears.
func NewFollow(path string, opts FollowOptions) *Follow {
	f := &Follow{path: path, opts: opts, starts: map[string]time.Time{}, kept: map[semantics.PMID][]source.InstValue{}, groupLast: map[semantics.PMID]time.Time{}}
	f.poll(time.Now())
	return f
}

// Writing reports whether the followed archive is being written at now:
// its last record is no older than the stall limit, or the directory is
// kept by pmlogger_check (its Latest folio exists).
func (f *Follow) Writing(now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cur == nil {
		return f.missing != nil
	}
	if st, err := os.Stat(f.path); err == nil && st.IsDir() && pcplog.HasLatest(f.path) {
		return true
	}
	return now.Sub(f.end) <= f.stallAfter()
}

// Truncated returns the zeros the archive followed now ends in, where a
// record should start (see Archive.Truncated), or nil.
func (f *Follow) Truncated() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cur == nil {
		return nil
	}
	return f.cur.Archives()[0].Truncated()
}

// Path returns the path followed, as given.
func (f *Follow) Path() string { return f.path }

// newest returns the archive to follow now.
func (f *Follow) newest() (string, error) {
	st, err := os.Stat(f.path)
	if err == nil && st.IsDir() {
		return pcplog.Newest(f.path, f.starts)
	}
	if !pcplog.IsArchivePath(f.path) {
		return "", pcplog.NotFound(f.path)
	}
	return f.path, nil
}

// poll opens the newest archive when there is none yet, reads what was
// added to it, and moves to a newer one of the directory once the served
// time reaches its start (or cur ended before it).
func (f *Follow) poll(now time.Time) {
	base, err := f.newest()
	if err != nil {
		if f.cur == nil {
			f.missing = err
		}
	} else if f.cur == nil || base != f.curBase {
		start, ok := f.starts[base]
		if !ok {
			if l, err := pcplog.ReadLabel(base + ".meta"); err == nil {
				start, ok = l.Start, true
				f.starts[base] = start
			}
		}
		// a new archive of the directory once its label is written and
		// the served time reaches its start
		if f.cur == nil || (ok && !now.Add(-f.delay()).Before(start)) {
			if rp, err := f.open(base); err == nil {
				f.use(rp, base, now)
			} else if f.cur == nil {
				f.missing = err
			}
		}
	}
	if f.cur == nil {
		return
	}
	f.readTail(now)
	f.reopen()
}

// reopen opens cur again when its .meta grew new metrics: a replay's metric
// list is made when it opens, and an archive opened just after pmlogger
// started may have had only the opening record's descriptors.
func (f *Follow) reopen() {
	fi, err := os.Stat(f.cur.Archives()[0].Path() + ".meta")
	if err != nil || fi.Size() == f.metaSize {
		return
	}
	f.metaSize = fi.Size()
	if len(f.cur.Archives()[0].Metrics()) <= len(f.cur.Metrics()) {
		return
	}
	rp, err := f.open(f.curBase)
	if err != nil {
		return
	}
	if f.prev != nil {
		f.prev.Close()
	}
	f.prev, f.cur = f.cur, rp
	f.tail.Close()
	f.tail = rp.Archives()[0].Records()
	f.tail.Only(func(semantics.PMID) bool { return false })
	clear(f.groupLast)
	f.steps = f.steps[:0]
	if f.vals != nil { // read again from the start at the next fetch
		f.vals.Close()
		f.vals, f.npend = nil, 0
	}
	f.epoch++
}

// open opens the archive base for a replay, as one pmlogger may still be
// writing (OpenLive: a cut last record is not yet written, not an error).
func (f *Follow) open(base string) (*Replay, error) {
	a, err := pcplog.OpenLive(base)
	if err != nil {
		return nil, err
	}
	return NewReplay([]*pcplog.Archive{a}, ReplayOptions{Interp: f.opts.Interp})
}

// use makes rp the archive followed.
func (f *Follow) use(rp *Replay, base string, now time.Time) {
	if f.prev != nil {
		f.prev.Close()
	}
	if f.tail != nil {
		f.tail.Close()
	}
	if f.vals != nil {
		// the old archive's records all precede the new one's start
		f.readValues(nil, rp.Start())
		f.vals.Close()
		f.vals = nil
	}
	if f.runStart.IsZero() {
		f.runStart = rp.Start()
	}
	f.prev, f.cur, f.curBase, f.missing = f.cur, rp, base, nil
	f.tail = rp.Archives()[0].Records()
	f.tail.Only(func(semantics.PMID) bool { return false })
	f.end, f.grown = rp.Start(), now
	clear(f.groupLast)
	f.steps = f.steps[:0]
	f.epoch++
}

// readTail reads the records added to cur since the last poll: its end
// and the logging interval.
func (f *Follow) readTail(now time.Time) {
	a := f.cur.Archives()[0]
	if err := a.Refresh(); err != nil {
		return // a Fetch reports it
	}
	n := 0
	for f.tail.Next() {
		rec := f.tail.Record()
		if rec.Mark {
			clear(f.groupLast)
			continue
		}
		if last, ok := f.groupLast[rec.First]; ok && rec.Time.After(last) {
			f.steps = append(f.steps, rec.Time.Sub(last))
			if len(f.steps) > maxSteps {
				f.steps = append(f.steps[:0], f.steps[len(f.steps)-maxSteps:]...)
			}
		}
		f.groupLast[rec.First] = rec.Time
		if rec.Time.After(f.end) {
			f.end = rec.Time
			n++
		}
	}
	if n > 0 {
		f.cur.grown() // upper bounds once past the end may be among them
		// when the volume was written, if that lies between the
		// previous read and this one (it is this host's clock), else now
		f.grown = now
		{
			if fi, err := os.Stat(a.LastVolumePath()); err == nil && fi.ModTime().After(f.polled) && fi.ModTime().Before(now) {
				f.grown = fi.ModTime()
			}
		}
	}
	f.polled = now
	if iv := medianInterval(f.steps); iv > 0 {
		f.interval = iv
	}
}

// maxSteps is how many of the last steps of fetch groups the logging
// interval is estimated from.
const maxSteps = 9

// medianInterval returns the median of steps (each from one record of a
// pmlogger fetch group to the group's next: the records of different groups
// of one logging tick lie milliseconds apart, so the steps between
// consecutive records say nothing of the interval), rounded to 100 ms from
// 1 s, to 10 ms from 100 ms, else to the millisecond (pmlogger's ticks come
// late by a few milliseconds, tens on a loaded host; its intervals are
// mostly whole seconds); 0 with no step (not one group logged twice yet).
func medianInterval(steps []time.Duration) time.Duration {
	if len(steps) == 0 {
		return 0
	}
	s := slices.Clone(steps)
	slices.Sort(s)
	m := s[len(s)/2]
	switch {
	case m >= time.Second:
		return m.Round(100 * time.Millisecond)
	case m >= 100*time.Millisecond:
		return m.Round(10 * time.Millisecond)
	}
	return max(m.Round(time.Millisecond), time.Millisecond)
}

// delay is the distance of the served time behind the wall clock.
func (f *Follow) delay() time.Duration {
	if f.opts.Delay > 0 {
		return f.opts.Delay
	}
	if f.interval == 0 {
		return FollowMargin
	}
	return f.interval + FollowMargin
}

// intervalText says the logging interval, or that it is not known yet.
func intervalText(iv time.Duration) string {
	if iv == 0 {
		return "not known yet (no metric logged twice), taken as " + defaultInterval.String()
	}
	return iv.String()
}

func (f *Follow) loggingInterval() time.Duration {
	if f.interval == 0 {
		return defaultInterval
	}
	return f.interval
}

// stallAfter is how long the archive may go without a new record.
func (f *Follow) stallAfter() time.Duration {
	return StallIntervals*f.loggingInterval() + StallMargin
}

// Fetch answers the values at now minus the delay (see Follow); now is the
// wall-clock time of the read.
func (f *Follow) Fetch(now time.Time, pmids []semantics.PMID, res *source.Result) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.poll(now)
	if f.cur == nil {
		emptySets(res, pmids)
		res.Time = now
		return nil
	}
	// to the microsecond (PCP's resolution: pmSetMode's timeval, a v2
	// archive's stamps), so that the time served can be told exactly
	ts := now.Add(-f.delay()).Truncate(time.Microsecond)
	if ts.After(f.end) {
		ts = f.end // the latest values
	}
	if ts.Before(f.served) {
		ts = f.served // never backwards (the delay can grow with the interval)
	}
	f.readValues(pmids, ts)
	err := f.cur.Fetch(ts, pmids, res)
	if errors.Is(err, semantics.ErrEOL) {
		emptySets(res, pmids)
		err = nil
	}
	if err != nil {
		return err
	}
	res.Time = ts
	f.served, f.lag = ts, now.Sub(ts)
	fellBack := false
	for i := range res.Sets {
		s := &res.Sets[i]
		if s.Err == nil && len(s.Values) == 0 && len(f.kept[s.PMID]) > 0 {
			s.Values = append(s.Values, f.kept[s.PMID]...)
			fellBack = true
		}
	}
	if !fellBack && f.prev != nil {
		f.prev.Close()
		f.prev = nil
	}
	return nil
}

// readValues brings the latest recorded values of pmids up to time ts:
// the records read before and those added since, up to ts (the others
// wait). A change of pmids reads cur again from its start; nil pmids
// keeps the reader.
func (f *Follow) readValues(pmids []semantics.PMID, ts time.Time) {
	if pmids != nil && (f.vals == nil || !slices.Equal(f.valsPMIDs, pmids)) {
		if f.vals != nil {
			f.vals.Close()
		}
		f.valsPMIDs = append(f.valsPMIDs[:0], pmids...)
		f.valsFor = make(map[semantics.PMID]bool, len(pmids))
		for _, p := range pmids {
			f.valsFor[p] = true
		}
		f.vals = f.cur.Archives()[0].Records()
		f.vals.Only(func(p semantics.PMID) bool { return f.valsFor[p] })
		f.npend = 0
	}
	if f.vals == nil {
		return
	}
	i := 0
	for ; i < f.npend && !f.pending[i].t.After(ts); i++ {
		f.keep(f.pending[i].sets)
	}
	if i > 0 { // the slots applied go to the end, their slices reused
		applied := append([]pendingRecord(nil), f.pending[:i]...)
		copy(f.pending, f.pending[i:f.npend])
		copy(f.pending[f.npend-i:], applied)
		f.npend -= i
	}
	for f.vals.Next() {
		rec := f.vals.Record()
		if rec.Mark || len(rec.Sets) == 0 {
			continue
		}
		if f.npend == 0 && !rec.Time.After(ts) {
			f.keep(rec.Sets)
			continue
		}
		if f.npend == len(f.pending) {
			f.pending = append(f.pending, pendingRecord{})
		}
		p := &f.pending[f.npend]
		f.npend++
		p.t = rec.Time
		if cap(p.sets) < len(rec.Sets) {
			p.sets = make([]source.ValueSet, len(rec.Sets))
		}
		p.sets = p.sets[:len(rec.Sets)]
		for j, set := range rec.Sets {
			p.sets[j] = source.ValueSet{PMID: set.PMID, ValFmt: set.ValFmt, Err: set.Err, Values: cloneValues(p.sets[j].Values[:0], set.Values)}
		}
	}
}

// keep records sets as the latest values of their metrics (none for a
// metric logged with an error or no value).
func (f *Follow) keep(sets []source.ValueSet) {
	for _, set := range sets {
		var vs []source.InstValue
		if set.Err == nil {
			vs = set.Values
		}
		f.kept[set.PMID] = cloneValues(f.kept[set.PMID][:0], vs)
	}
}

// cloneValues appends copies of values to dst (string and aggregate
// payloads copied).
func cloneValues(dst, values []source.InstValue) []source.InstValue {
	for _, v := range values {
		if !v.Value.Type().IsNumeric() {
			v.Value = v.Value.Clone()
		}
		dst = append(dst, v)
	}
	return dst
}

// emptySets makes res one set without values per pmid, reusing its slices.
func emptySets(res *source.Result, pmids []semantics.PMID) {
	if cap(res.Sets) < len(pmids) {
		res.Sets = append(res.Sets[:cap(res.Sets)], make([]source.ValueSet, len(pmids)-cap(res.Sets))...)
	}
	res.Sets = res.Sets[:len(pmids)]
	for i, p := range pmids {
		res.Sets[i] = source.ValueSet{PMID: p, Values: res.Sets[i].Values[:0]}
	}
}

// Metrics returns the metrics of the archive followed now.
func (f *Follow) Metrics() []source.Metric {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cur == nil {
		return nil
	}
	return f.cur.Metrics()
}

// Instances returns the instances of the archive followed now, and those
// of the archive before it while its last values are still served.
func (f *Follow) Instances(indom semantics.InDom) []source.Instance {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cur == nil {
		return nil
	}
	insts := f.cur.Instances(indom)
	if f.prev == nil {
		return insts
	}
	have := map[int32]bool{}
	for _, in := range insts {
		have[in.ID] = true
	}
	out := slices.Clone(insts)
	for _, in := range f.prev.Instances(indom) {
		if !have[in.ID] {
			out = append(out, in)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Epoch numbers the archive followed (source.Epoched): it changes when
// Follow moves to a new archive. A missing path is looked for again here.
func (f *Follow) Epoch() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cur == nil {
		f.poll(time.Now())
	}
	return f.epoch
}

// Status reports the follow's health at now (source.Monitored).
func (f *Follow) Status(now time.Time) source.Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cur == nil {
		detail := f.path + ": nothing to follow"
		if f.missing != nil {
			detail = f.missing.Error()
		}
		return source.Status{Reason: source.ReasonMissing, Detail: detail, Lag: -1}
	}
	st := source.Status{Lag: f.lag}
	if f.served.IsZero() {
		st.Lag = -1
	}
	if d := now.Sub(f.grown); d > f.stallAfter() {
		st.Reason = source.ReasonStalled
		// the same words for the whole stall: one log line per change of
		// state, not one per scrape
		st.Detail = fmt.Sprintf("%s: no record added since %s (for more than %s: logging interval %s; last record %s)", f.curBase, f.grown.UTC().Format(time.RFC3339), f.stallAfter(), intervalText(f.interval), f.end.UTC().Format(time.RFC3339))
	}
	return st
}

// Close closes the archives followed.
func (f *Follow) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range []*pcplog.Reader{f.tail, f.vals} {
		if r != nil {
			r.Close()
		}
	}
	if f.prev != nil {
		f.prev.Close()
	}
	if f.cur != nil {
		return f.cur.Close()
	}
	return nil
}

// FollowWritten sorts the paths a user gave into sources to follow and
// paths to replay: an archive being written, a directory whose newest
// archive is (or that pmlogger_check keeps), each such host directory of a
// pmlogger farm, and a path that names nothing yet (missing until it
// appears) are followed; finished archives and directories of them, and
// archives that cannot be opened (so that opening them reports why), are
// returned for a replay, in the order given.
func FollowWritten(paths []string, opts FollowOptions, now time.Time) (followed []*Follow, replay []string) {
	for _, p := range paths {
		cands := []string{p}
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			if dirs := pcplog.HostDirs(p); len(dirs) > 0 {
				cands = dirs
			}
		}
		for _, c := range cands {
			f := NewFollow(c, opts)
			if f.Writing(now) && (f.missing == nil || errors.Is(f.missing, fs.ErrNotExist)) {
				followed = append(followed, f)
				continue
			}
			f.Close()
			replay = append(replay, c)
		}
	}
	return followed, replay
}

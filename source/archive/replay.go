package archive

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

// ReplayOptions configures a Replay.
type ReplayOptions struct {
	// Interp is the rule for INSTANT and DISCRETE values between
	// observations (default nearest, PCP 6.3.2 and later).
	Interp semantics.InterpRule
	// Window is the number of records kept in memory to find the next
	// observation of each series (default 32), and at most windowValues
	// values in all. Beyond it a second reader probes ahead, so memory
	// stays bounded whatever the archive's shape.
	Window int
}

// ErrBackwards is returned by Fetch for a time before the previous one after
// the replay could not be restarted.
var ErrBackwards = errors.New("replay: time went backwards")

// Replay answers the values of an archive, or of several archives forming
// one timeline (as a libpcp multi-archive context), at arbitrary times in
// increasing order, with libpcp's interpolation (interp.c): it implements
// source.Source, Fetch(t) interpolating at t.
//
// It reads the archives incrementally: the temporal index positions the
// first read, and per metric instance only the prior observation and the
// next one are kept (plus a bounded window of records ahead). An archive
// that is still being written is re-read when a fetch passes its end.
// Fetching a time earlier than the previous one restarts from the start.
//
// While fetches are a few records apart or less, a goroutine reads and
// decodes the records ahead (see prefetch), the replay's only one. Further
// apart (sparseRun), plain volumes are read sparsely: a run of records
// before the fetch time whose last record holds every instance in the
// result is passed over unread but for that record, its records' framing
// checked (length, trailer, time order, no <mark>) and their value sets
// not decoded (see pcplog.Reader.SkipRun); the goroutine is then the one
// of pcplog.Tails instead.
type Replay struct {
	// pacing.supplies as a value, made once (see front)
	suppliesFn func(*pcplog.Record) bool
	mu         sync.Mutex
	archives   []*pcplog.Archive
	opts       ReplayOptions
	start      time.Time // label start of the first archive: time origin

	metrics []source.Metric
	descs   map[semantics.PMID]semantics.Desc

	end     time.Time
	haveEnd bool
	lastReq float64
	fetched bool
	served  time.Time         // the time of the last fetch
	runs    *pcplog.RunStarts // for Generation, made at its first call

	// the phases of a fetch, each with its own state
	bounds      // the metrics asked and their instances' bounds
	window      // the records read ahead of the position
	pacing      // sparse reading
	positioning // the first fetch's positioning

	test *replayTest // nil but in tests
}

// replayTest holds what tests set and count of a replay (Replay.test).
type replayTest struct {
	// applyAll: every record's value sets are applied (none passed over,
	// none skipped as superseded); fullScan: the first fetch positions
	// from the archive's start, never from an index entry
	applyAll, fullScan bool
	// value sets skipped as superseded by searchForward moving the
	// position (of bounds.superseded)
	searchSuperseded int
	// switches between dense and sparse reading; records the positioning
	// applied (or passed over: see front); positionings started over from
	// the archive's start
	switches, positioned, restarts int
}

// applyAll reports whether a test asked for every record to be applied.
func (r *Replay) applyAll() bool { return r.test != nil && r.test.applyAll }

// NewReplay replays archives (sorted by their start time) as one timeline.
func NewReplay(archives []*pcplog.Archive, opts ReplayOptions) (*Replay, error) {
	if len(archives) == 0 {
		return nil, errors.New("replay: no archive")
	}
	if opts.Window <= 0 {
		opts.Window = 32
	}
	as := append([]*pcplog.Archive(nil), archives...)
	sort.SliceStable(as, func(i, j int) bool { return as[i].Label().Start.Before(as[j].Label().Start) })
	r := &Replay{archives: as, opts: opts, start: as[0].Label().Start}
	r.window.secs = r.secs
	r.suppliesFn = func(rec *pcplog.Record) bool { return r.pacing.supplies(&r.bounds, rec) }
	if len(as) == 1 {
		// one name per entry already, in name order
		r.metrics = slices.Clone(as[0].Metrics())
	} else {
		seen := map[string]bool{}
		for _, a := range as {
			for _, m := range a.Metrics() {
				if !seen[m.Name] {
					seen[m.Name] = true
					r.metrics = append(r.metrics, m)
				}
			}
		}
	}
	// a PMID's descriptor: its first in archive order
	r.descs = make(map[semantics.PMID]semantics.Desc, len(r.metrics))
	for _, m := range r.metrics {
		if _, ok := r.descs[m.Desc.PMID]; !ok {
			r.descs[m.Desc.PMID] = m.Desc
		}
	}
	if len(as) > 1 {
		sort.SliceStable(r.metrics, func(i, j int) bool { return r.metrics[i].Name < r.metrics[j].Name })
	}
	r.pms = map[semantics.PMID]*pmState{}
	r.reset()
	return r, nil
}

// Start returns the start of the timeline (the first archive's label).
func (r *Replay) Start() time.Time { return r.start }

// End returns the time of the last record of the timeline, re-reading a
// last archive that grew.
func (r *Replay) End() (time.Time, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.refreshEnd(); err != nil {
		return time.Time{}, err
	}
	return r.end, nil
}

// Archives returns the archives of the timeline, in time order.
func (r *Replay) Archives() []*pcplog.Archive { return r.archives }

// Metrics returns every metric of the archives, in name order.
func (r *Replay) Metrics() []source.Metric { return r.metrics }

// instanceIDs returns the ids of Instances(indom), in id order.
func (r *Replay) instanceIDs(indom semantics.InDom) []int32 {
	if len(r.archives) == 1 {
		return r.archives[0].InstanceIDs(indom)
	}
	var out []int32
	for _, a := range r.archives {
		out = append(out, a.InstanceIDs(indom)...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Instances returns every instance the archives list for the domain (the
// union, as pmGetInDomArchive), by id, with the names and instance labels
// in force at the end of the timeline.
func (r *Replay) Instances(indom semantics.InDom) []source.Instance {
	ins, _ := r.InstancesInForce(indom, time.Unix(1<<62, 0))
	return ins
}

// InstancesInForce returns the instances of Instances with the names and
// instance labels in force at t (source.InDomHistory): an archive that
// starts at or before t overrides the names of the archives before it, and
// an instance only later archives list has its name there.
func (r *Replay) InstancesInForce(indom semantics.InDom, t time.Time) ([]source.Instance, time.Time) {
	if len(r.archives) == 1 {
		return r.archives[0].InstancesInForce(indom, t)
	}
	var until time.Time
	sooner := func(u time.Time) {
		if !u.IsZero() && (until.IsZero() || u.Before(until)) {
			until = u
		}
	}
	byID := map[int32]source.Instance{}
	for i, a := range r.archives {
		ins, u := a.InstancesInForce(indom, t)
		sooner(u)
		started := i == 0 || !a.Label().Start.After(t)
		if !started {
			sooner(a.Label().Start)
		}
		for _, in := range ins {
			if _, ok := byID[in.ID]; !ok || started {
				byID[in.ID] = in
			}
		}
	}
	out := make([]source.Instance, 0, len(byID))
	for _, in := range byID {
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, until
}

// Close closes the readers and the archives.
func (r *Replay) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.feed.close()
	if r.runs != nil {
		r.runs.Close()
	}
	var first error
	for _, a := range r.archives {
		if err := a.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// reset forgets every bound and restarts reading (a fetch before the
// previous one, or a fetch naming a metric not followed so far).
func (r *Replay) reset() {
	r.window.restart(&feed{archives: r.archives, keep: r.follows})
	r.bounds.reset(r)
	r.pmsChanged()
	r.pacing.reset()
	r.fetched = false
}

// pmsChanged follows a change of r.pms: the list of states is made anew
// and every hint forgotten.
func (r *Replay) pmsChanged() {
	r.bounds.changed()
	r.supHint, r.winHint = r.supHint[:0], r.winHint[:0]
}

// secs is libpcp's time measure: seconds from the archive start as a double
// (__pmTimestampSub: seconds and nanoseconds subtracted separately, the sum
// in long double).
func (r *Replay) secs(t time.Time) float64 {
	ds := t.Unix() - r.start.Unix()
	dn := int64(t.Nanosecond()) - int64(r.start.Nanosecond())
	return semantics.TimestampSub(ds, dn)
}

func (r *Replay) refreshEnd() error {
	last := r.archives[len(r.archives)-1]
	if r.haveEnd {
		if err := last.Refresh(); err != nil {
			return err
		}
	}
	end, err := last.End()
	if err != nil {
		return err
	}
	r.end, r.haveEnd = end, true
	return nil
}

// grown forgets what fetches learnt at the end of the timeline: the time
// after which an instance has no values (libpcp's t_last), set when a
// search forward for its upper bound reached the last record. Records were
// added since (a followed archive), so a search must look at them: libpcp,
// made for finished archives, would keep answering no value up to the
// next record read.
func (r *Replay) grown() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bounds.grown()
}

// Fetch fills res with the values of pmids interpolated at t, following
// libpcp's __pmLogFetchInterp step by step (forward direction): bounds are
// kept per instance between fetches, the archive is rolled forward only
// when some instance lacks a lower bound, and searched forward only for
// instances lacking an upper bound.
func (r *Replay) Fetch(t time.Time, pmids []semantics.PMID, res *source.Result) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	tReq := r.secs(t)
	if err := r.inTimeline(t, tReq); err != nil {
		return err
	}
	pms := r.ask(pmids, tReq)
	seenMark := false
	r.corrupt = false
	if !r.fetched {
		if err := r.first(t, tReq, pms); err != nil {
			return err
		}
	}
	if r.fetched && r.pacing.pace(r.feed) {
		r.switched()
	}
	if err := r.lowerBounds(tReq, &seenMark); err != nil {
		return r.failed(err)
	}
	if err := r.upperBounds(tReq, &seenMark); err != nil {
		return r.failed(err)
	}
	if r.corrupt {
		return r.corrupted(t)
	}
	r.pacing.observe(r.feed, r.pmList)
	answer(res, pmids, pms, r.opts.Interp, tReq, seenMark)
	res.Time = t
	r.lastReq, r.fetched, r.served = tReq, true, t
	return nil
}

// first positions the first fetch at t (tReq seconds from the start), for
// the metrics pms.
func (r *Replay) first(t time.Time, tReq float64, pms []*pmState) error {
	if err := r.position(t, tReq); err != nil {
		r.reset() // the feed and the bounds of the failed attempt
		return err
	}
	for _, pm := range pms {
		if pm != nil {
			pm.lastNumval = -1
		}
	}
	return nil
}

// corrupted fails the fetch at t that read a record whose encoding
// contradicts a metric's type, as libpcp does; the next fetch starts
// afresh.
func (r *Replay) corrupted(t time.Time) error {
	r.corrupt = false
	r.reset()
	return fmt.Errorf("%s: a record read for %s holds a value encoded against its metric's type: %w", r.archives[0].Path(), t.UTC().Format(time.RFC3339Nano), semantics.PMError(pcplog.PMErrLogRec))
}

// inTimeline checks that t (tReq seconds from the start) is within the
// archives, re-reading their end when past it.
func (r *Replay) inTimeline(t time.Time, tReq float64) error {
	if tReq < -0.001 {
		return fmt.Errorf("%s: %w", t.UTC().Format(time.RFC3339Nano), semantics.ErrEOL)
	}
	if !r.haveEnd {
		if err := r.refreshEnd(); err != nil {
			return err
		}
	}
	if tReq > r.secs(r.end)+0.001 {
		if err := r.refreshEnd(); err != nil {
			return err
		}
		if tReq > r.secs(r.end) {
			return fmt.Errorf("%s is after the end of the archive (%s): %w", t.UTC().Format(time.RFC3339Nano), r.end.UTC().Format(time.RFC3339Nano), semantics.ErrEOL)
		}
	}
	return nil
}

// ask is the zeroth and first pass of a fetch at tReq: the states of
// pmids' metrics (made for those not asked before, which resets the
// replay, as does a time before the previous fetch's), and which instances
// are wanted (r.want).
func (r *Replay) ask(pmids []semantics.PMID, tReq float64) []*pmState {
	added := r.bounds.add(pmids, r)
	if added {
		r.pmsChanged()
	}
	if r.fetched && (tReq < r.lastReq || added) {
		r.reset()
	}
	pms := r.pmsOf(pmids, added)
	r.bounds.wanted(pms, tReq)
	return pms
}

// lowerBounds is a fetch's second pass: the position is rolled forward to
// tReq when a wanted instance lacks a lower bound.
func (r *Replay) lowerBounds(tReq float64, seenMark *bool) error {
	doneRoll := false
	back := 0
	for _, c := range r.want {
		if c.tFirst >= 0 && tReq < c.tFirst {
			continue
		}
		if c.prior.T < 0 || c.prior.T > tReq {
			if back == 0 && !doneRoll {
				doneRoll = true
				if err := r.roll(tReq, seenMark); err != nil {
					return err
				}
			}
		}
		if (c.prior.Kind == semantics.BoundUndefined && !c.scPrior) ||
			(c.prior.T > tReq && !c.scPrior) ||
			(c.next.Kind == semantics.BoundMark && c.prior.T == tReq) {
			back++
			c.search = true
		}
	}
	if back > 0 {
		r.bounds.scanned(tReq)
	}
	return nil
}

// upperBounds is a fetch's third pass: the records after the position are
// searched for the wanted instances that lack an upper bound.
func (r *Replay) upperBounds(tReq float64, seenMark *bool) error {
	if forw := r.bounds.unbounded(tReq); forw > 0 {
		return r.searchForward(tReq, forw, seenMark)
	}
	return nil
}

// failed returns a fetch's error; a first fetch's failure forgets its
// attempt (the feed, with its goroutine, and the bounds), so that the next
// fetch positions anew, as a failed positioning does.
func (r *Replay) failed(err error) error {
	if !r.fetched {
		r.reset()
	}
	return err
}

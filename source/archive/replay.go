package archive

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
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

// windowValues bounds the values the window holds (8 MiB of them): records
// of every metric of a large host are copied into it only a few at a time.
var windowValues = 1 << 18 // a variable for tests

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
// While fetches are a few records apart or less, every record is read and
// decoded, through the volume readers' windows. Further apart (sparseRun),
// plain volumes are read sparsely: a run of records before the fetch time whose last record
// holds every instance in the result is passed over unread but for that
// record, its records' framing checked (length, trailer, time order, no
// <mark>) and their value sets not decoded (see Reader.skipRun).
type Replay struct {
	// secs and supplies as values, made once (see front)
	secsFn     func(time.Time) float64
	suppliesFn func(*Record) bool
	mu         sync.Mutex
	archives   []*Archive
	opts       ReplayOptions
	start      time.Time // label start of the first archive: time origin

	metrics []source.Metric
	descs   map[semantics.PMID]semantics.Desc

	pms map[semantics.PMID]*pmState
	// caliper's answers since the last reset, per instance domain
	calipers map[semantics.InDom]map[int32][2]float64
	// hashWalkOrder's answers since the last reset, per instance domain
	orders map[semantics.InDom][]int32
	want   []*icp
	ending []*icp // searchForward's scratch
	// the metrics of the last Fetch and their states (see pmsOf)
	lastPMIDs []semantics.PMID
	lastPMs   []*pmState

	feed    *feed
	setHint []setHint // the metric at each set position of the last record
	// the same for the records supplies and fillWin see (the reader's,
	// before the window leaves out the metrics not followed)
	supHint, winHint []setHint
	pmList           []*pmState // the states of r.pms that are not nil
	view             winRec     // the reader's current record, seen in place
	win              []*winRec  // records read ahead of the position, oldest first
	// values held in win
	winValues int
	spare     []*winRec
	end       time.Time
	haveEnd   bool
	lastReq   float64
	fetched   bool

	applyAll   bool // tests: every record's value sets are applied (none passed over)
	superseded int  // value sets skipped as superseded
	// of which by searchForward moving the position
	searchSuperseded int

	// sparse reading (see pace): the records this fetch moved the position
	// over (passed over included), the fetches since the positioning, the
	// records passed over and the runs refused (and their counts as of the
	// previous fetch), the fetches sparse reading waits for after refused
	// runs, and switches between dense and sparse reading (tests)
	moved                       int
	fetches                     int
	passed, refused             int
	passedBefore, refusedBefore int
	backoff, sparseWait         int
	switches                    int
	noSparse                    bool   // tests: never read sparsely
	gen                         uint32 // supplies' mark
	// the last record applied at the position (its time, a mark), and
	// whether it held every instance in the result (see lastSupplied)
	lastPos     float64
	lastPosMark bool
	wouldPass   bool

	// the first fetch's positioning (see position): rolling tracks the
	// earliest record time it applies in rollMin while trackMin is set
	trackMin bool
	rollMin  float64
	// tests: fullScan positions from the archive's start, never from an
	// index entry; positioned counts the records the positioning applied
	// (or passed over: see front)
	fullScan   bool
	positioned int
	restarts   int // positionings started over from the archive's start
}

type pmState struct {
	desc       semantics.Desc
	icps       []*icp // candidate instances, in instance id order
	order      []*icp // the same in the order of libpcp's results (hashWalkOrder)
	byInst     map[int32]*icp
	hint       []*icp // the instance at each position of the last record
	lastNumval int
	numval     int
	typeErr    bool
}

// setHint caches the metric at one value set position of the last record:
// its PMID and state (nil when not replayed); ok once filled.
type setHint struct {
	pmid semantics.PMID
	pm   *pmState
	ok   bool
}

// icp is libpcp's instcntl_t: the interpolation bounds of one instance.
// Times are seconds from the start, -1 when unset.
type icp struct {
	// what every fetch reads of every wanted instance first, in one cache
	// line (its passes, supplies, answer), then the bounds: the update of
	// a numeric prior touches nothing else
	inst     int32
	inresult bool
	search   bool
	scPrior  bool // SCANNED: no need to search back again
	scNext   bool
	gen      uint32 // supplies' mark
	// time_caliper: with caliper set, the instance is in the result only
	// from birth to death
	caliper bool
	tFirst  float64
	tLast   float64
	// the bounds, as semantics.Interpolate takes them
	prior        semantics.Bound
	next         semantics.Bound
	birth, death float64
	bPrior       []byte
	bNext        []byte
}

type winRec struct {
	t    float64
	mark bool
	sets []source.ValueSet
	vals []source.InstValue
	buf  []byte
	ai   int
	vol  int
	off  int64
	time time.Time
}

// NewReplay replays archives (sorted by their start time) as one timeline.
func NewReplay(archives []*Archive, opts ReplayOptions) (*Replay, error) {
	if len(archives) == 0 {
		return nil, errors.New("replay: no archive")
	}
	if opts.Window <= 0 {
		opts.Window = 32
	}
	as := append([]*Archive(nil), archives...)
	sort.SliceStable(as, func(i, j int) bool { return as[i].Label().Start.Before(as[j].Label().Start) })
	r := &Replay{archives: as, opts: opts, start: as[0].Label().Start}
	r.secsFn, r.suppliesFn = r.secs, r.supplies
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
func (r *Replay) Archives() []*Archive { return r.archives }

// Metrics returns every metric of the archives, in name order.
func (r *Replay) Metrics() []source.Metric { return r.metrics }

// instanceIDs returns the ids of Instances(indom), in id order.
func (r *Replay) instanceIDs(indom semantics.InDom) []int32 {
	if len(r.archives) == 1 {
		return r.archives[0].instanceIDs(indom)
	}
	var out []int32
	for _, a := range r.archives {
		out = append(out, a.instanceIDs(indom)...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Instances returns every instance the archives list for the domain (the
// union, as pmGetInDomArchive), by id, with the names and instance labels
// in force at the end of the timeline.
func (r *Replay) Instances(indom semantics.InDom) []source.Instance {
	ins, _ := r.InstancesInForce(indom, maxTime)
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
	var first error
	for _, a := range r.archives {
		if err := a.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// pmsOf returns the state of each metric of pmids (nil: not in the
// archives), from the last call's answer when asked for the same metrics
// again with none added since.
func (r *Replay) pmsOf(pmids []semantics.PMID, added bool) []*pmState {
	if !added && slices.Equal(pmids, r.lastPMIDs) {
		return r.lastPMs
	}
	r.lastPMIDs = append(r.lastPMIDs[:0], pmids...)
	r.lastPMs = r.lastPMs[:0]
	for _, p := range pmids {
		r.lastPMs = append(r.lastPMs, r.pms[p])
	}
	return r.lastPMs
}

// reset forgets every bound and restarts reading (a fetch before the
// previous one, or a fetch naming a metric not followed so far).
func (r *Replay) reset() {
	if r.feed != nil {
		r.feed.close()
	}
	r.feed = &feed{archives: r.archives, keep: r.follows}
	r.calipers = map[semantics.InDom]map[int32][2]float64{} // the metadata may have grown
	r.orders = map[semantics.InDom][]int32{}
	r.spare = append(r.spare, r.win...)
	r.win = r.win[:0]
	r.winValues = 0
	for p := range r.pms {
		r.pms[p] = r.newPM(p)
	}
	r.pmsChanged()
	r.lastPMIDs = r.lastPMIDs[:0] // their states are new
	r.fetched = false
	r.moved, r.fetches, r.backoff, r.sparseWait = 0, 0, 0, 0
	r.passedBefore, r.refusedBefore = r.passed, r.refused
}

func (r *Replay) newPM(p semantics.PMID) *pmState {
	d, ok := r.descs[p]
	if !ok {
		return nil
	}
	pm := &pmState{desc: d, lastNumval: -1}
	insts := []int32{semantics.InNull}
	var cal map[int32][2]float64 // birth, death (seconds from start)
	if d.InDom != semantics.InDomNull {
		insts = r.instanceIDs(d.InDom)
		var ok bool
		if cal, ok = r.calipers[d.InDom]; !ok {
			cal = r.caliper(d.InDom)
			r.calipers[d.InDom] = cal
		}
	}
	// one block per metric: the bounds of a record's instances are updated
	// together, record after record
	store := make([]icp, len(insts))
	pm.icps = make([]*icp, len(insts))
	pm.byInst = make(map[int32]*icp, len(insts))
	for i, inst := range insts {
		c := &store[i]
		*c = icp{inst: inst, prior: semantics.Bound{T: -1}, next: semantics.Bound{T: -1}, tFirst: -1, tLast: -1}
		if b, ok := cal[inst]; ok {
			c.caliper, c.birth, c.death = true, b[0], b[1]
		}
		pm.icps[i] = c
		pm.byInst[inst] = c
	}
	pm.order = pm.icps
	if d.InDom != semantics.InDomNull {
		ids, ok := r.orders[d.InDom]
		if !ok || len(ids) != len(insts) { // (the metadata grew since)
			list := insts
			if len(r.archives) == 1 {
				list = r.archives[0].inDomArchiveOrder(d.InDom)
			}
			ids = hashWalkOrder(list)
			r.orders[d.InDom] = ids
		}
		pm.order = make([]*icp, 0, len(ids))
		for _, inst := range ids {
			pm.order = append(pm.order, pm.byInst[inst])
		}
	}
	return pm
}

// hashWalkOrder returns ids in the order libpcp's interpolated results list
// them: the walk of its per-metric instance hash table (interp.c, hash.c),
// preallocated with as many buckets as ids, each id added in list order at
// the head of bucket id % len(ids), walked bucket 0 upward and each chain
// from its head. (With as many buckets as ids, the table never grows.)
func hashWalkOrder(list []int32) []int32 {
	n := uint32(len(list))
	// a counting sort by bucket, each bucket filled from its end: the
	// chains' head-first order
	end := make([]int32, n+1)
	for _, id := range list {
		end[uint32(id)%n+1]++
	}
	for k := uint32(1); k <= n; k++ {
		end[k] += end[k-1]
	}
	out := make([]int32, n)
	for _, id := range list {
		k := uint32(id)%n + 1
		end[k]--
		out[end[k]] = id
	}
	return out
}

// followed is follows as of now, for the feed's readers (the metrics
// followed change only with a reset, which starts a new feed).
func (r *Replay) followed() func(semantics.PMID) bool {
	set := make(map[semantics.PMID]bool, len(r.pms))
	for p, pm := range r.pms {
		if pm != nil {
			set[p] = true
		}
	}
	return func(p semantics.PMID) bool { return set[p] }
}

// pmsChanged follows a change of r.pms: the list of states is made anew
// and every hint forgotten.
func (r *Replay) pmsChanged() {
	r.pmList = r.pmList[:0]
	for _, pm := range r.pms {
		if pm != nil {
			r.pmList = append(r.pmList, pm)
		}
	}
	r.setHint, r.supHint, r.winHint = r.setHint[:0], r.supHint[:0], r.winHint[:0]
}

// pmAt returns the state of p, the metric at set position i of a record,
// through hints: records list their metrics in the same order time after
// time, so the metric at each position is remembered before asking the
// map.
func (r *Replay) pmAt(hints *[]setHint, i int, p semantics.PMID) *pmState {
	if i >= len(*hints) {
		*hints = append(*hints, make([]setHint, i+1-len(*hints))...)
	}
	h := &(*hints)[i]
	if !h.ok || h.pmid != p {
		*h = setHint{pmid: p, pm: r.pms[p], ok: true}
	}
	return h.pm
}

// follows reports whether the replay follows a metric (the readers skip
// the value sets of the others undecoded).
func (r *Replay) follows(p semantics.PMID) bool { return r.pms[p] != nil }

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

// Fetch fills res with the values of pmids interpolated at t, following
// libpcp's __pmLogFetchInterp step by step (forward direction): bounds are
// kept per instance between fetches, the archive is rolled forward only
// when some instance lacks a lower bound, and searched forward only for
// instances lacking an upper bound.
func (r *Replay) Fetch(t time.Time, pmids []semantics.PMID, res *source.Result) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	tReq := r.secs(t)
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
	added := false
	for _, p := range pmids {
		if _, ok := r.pms[p]; !ok {
			r.pms[p] = r.newPM(p)
			added = true
		}
	}
	if added {
		r.pmsChanged()
	}
	if r.fetched && (tReq < r.lastReq || added) {
		r.reset()
	}
	pms := r.pmsOf(pmids, added)
	// zeroth and first pass: which instances are wanted.
	r.want = r.want[:0]
	for _, pm := range pms {
		if pm == nil {
			continue
		}
		pm.numval, pm.typeErr = 0, false
		for _, c := range pm.icps {
			c.search = false
			c.inresult = true
			if c.caliper && (tReq < c.birth || tReq > c.death) {
				c.inresult = false
				continue
			}
			pm.numval++
			r.want = append(r.want, c)
		}
	}
	seenMark := false
	if !r.fetched {
		if err := r.position(t, tReq); err != nil {
			r.reset() // the feed and the bounds of the failed attempt
			return err
		}
		for _, pm := range pms {
			if pm != nil {
				pm.lastNumval = -1
			}
		}
	}
	if r.fetched {
		r.pace()
	}
	// second pass: lower bounds.
	doneRoll := false
	back := 0
	for _, c := range r.want {
		if c.tFirst >= 0 && tReq < c.tFirst {
			continue
		}
		if c.prior.T < 0 || c.prior.T > tReq {
			if back == 0 && !doneRoll {
				doneRoll = true
				if err := r.roll(tReq, &seenMark); err != nil {
					return r.failed(err)
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
		// Everything before the read position has been applied to the
		// bounds already, so a backward search finds nothing new: mark the
		// region scanned, as libpcp does when it reaches the start.
		for _, c := range r.want {
			if !c.search {
				continue
			}
			if c.prior.Kind != semantics.BoundUndefined && c.prior.T <= tReq {
				c.scPrior = true
			} else if c.tFirst < tReq {
				c.tFirst = tReq
				c.scPrior = true
			}
			c.search = false
		}
	}
	// third pass: upper bounds.
	forw := 0
	for _, c := range r.want {
		if c.tLast >= 0 && tReq > c.tLast {
			continue
		}
		if (c.next.Kind == semantics.BoundUndefined && !c.scNext) ||
			c.next.T < tReq ||
			(c.prior.Kind == semantics.BoundMark && c.next.T == tReq) {
			forw++
			c.search = true
		}
	}
	if forw > 0 {
		if err := r.searchForward(tReq, forw, &seenMark); err != nil {
			return r.failed(err)
		}
	}
	if !r.feed.sparse && r.moved >= sparseRun {
		r.wouldPass = r.lastSupplied()
	}
	r.answer(pmids, pms, tReq, seenMark, res)
	res.Time = t
	r.lastReq, r.fetched = tReq, true
	return nil
}

// failed returns a fetch's error; a first fetch's failure forgets its
// attempt (the feed and the bounds), so that the next
// fetch positions anew, as a failed positioning does.
func (r *Replay) failed(err error) error {
	if !r.fetched {
		r.reset()
	}
	return err
}

// at returns the record at window position i, reading it if needed; nil
// at the end of the timeline.
func (r *Replay) at(i int) (*winRec, error) {
	for len(r.win) <= i {
		ok, err := r.readOne()
		if err != nil || !ok {
			return nil, err
		}
	}
	return r.win[i], nil
}

func (r *Replay) pop() {
	w := r.win[0]
	r.winValues -= len(w.vals)
	copy(r.win, r.win[1:])
	r.win[len(r.win)-1] = nil
	r.win = r.win[:len(r.win)-1]
	r.spare = append(r.spare, w)
}

// roll is do_roll: read forward from the position while records are at or
// before tReq, updating the bounds; the position moves past them.
func (r *Replay) roll(tReq float64, seenMark *bool) error {
	for {
		w, direct, err := r.front(tReq)
		if err != nil || w == nil {
			return err
		}
		if w.t > tReq {
			return nil
		}
		if r.trackMin {
			r.rollMin = min(r.rollMin, w.t)
			r.positioned++
		}
		r.updateBounds(w, tReq, true, nil, seenMark, r.successor(w, direct, tReq))
		r.moved++
		r.lastPos, r.lastPosMark = w.t, w.mark
		if !direct {
			r.pop()
		}
	}
}

// successor returns the value sets of the record that roll applies right
// after w, when w is before tReq and that record is another record of
// values at or before tReq, not earlier than w (nil otherwise, or when it
// is not in the window); see updateBounds for why w's sets that it repeats can
// be skipped.
func (r *Replay) successor(w *winRec, direct bool, tReq float64) []source.ValueSet {
	if w.mark || w.t >= tReq || r.applyAll {
		return nil
	}
	if !direct && len(r.win) > 1 {
		if n := r.win[1]; !n.mark && n.t <= tReq && n.t >= w.t {
			return n.sets
		}
	}
	return nil
}

// pace chooses the reading for this fetch from the previous one (the first
// fetch's positioning tells nothing of the pace): sparse when it moved the
// position over sparseRun records or more and the last of them held every
// instance in the result (see lastSupplied), dense when it moved over one
// at most, or when it read sparsely and its runs were refused and none
// accepted (reading sparsely then reads every record, one read each). After such a fetch, sparse reading waits for a number of
// fetches, doubled at each refusal up to 64, reset by a run accepted.
func (r *Replay) pace() {
	moved, passed, refused := r.moved, r.passed-r.passedBefore, r.refused-r.refusedBefore
	r.moved, r.passedBefore, r.refusedBefore = 0, r.passed, r.refused
	r.fetches++
	if r.sparseWait > 0 {
		r.sparseWait--
	}
	switch {
	case r.fetches < 2:
	case r.feed.sparse && r.feed.delivered && !r.feed.plainAt(r.feed.lastAi, r.feed.lastVol):
		if r.feed.goDense() { // a compressed volume: nothing to pass over
			r.switches++
		}
	case r.feed.sparse && refused > 0 && passed == 0:
		r.backoff = min(max(2*r.backoff, 4), 64)
		r.sparseWait = r.backoff
		if r.feed.goDense() {
			r.switches++
		}
	case r.feed.sparse && passed > 0:
		r.backoff = 0
	case moved >= sparseRun && r.wouldPass && !r.noSparse && r.sparseWait == 0:
		if r.feed.goSparse() {
			r.switches++
		}
	case moved <= 1:
		if r.feed.goDense() {
			r.switches++
		}
	}
}

// lastSupplied reports whether every instance in the result has its lower
// bound from the last record this fetch applied at the position: sparse
// reading would then have passed over the records before it (see
// supplies), as it will at this pace.
func (r *Replay) lastSupplied() bool {
	if r.lastPosMark {
		return false
	}
	for _, pm := range r.pmList {
		for _, c := range pm.icps {
			if c.inresult && (c.prior.Kind != semantics.BoundValue || c.prior.T != r.lastPos) {
				return false
			}
		}
	}
	return true
}

// sparseRun is the number of records a fetch must move the position over
// for the following fetches to read sparsely (see front): then most
// records are passed over unread, and reading them one by one costs less
// than decoding them all.
const sparseRun = 4

// supplies reports whether rec, the last record of a run of records at the
// position that are values, at or before tReq (only rec may be at tReq) and
// in time order, holds a value (no error) of every instance in the result
// of every followed metric: the instances updateBounds changes. Applying
// rec alone then leaves every bound as applying the whole run does, as for
// the superseded sets of a successor (see updateBounds), the argument
// holding for any number of records between: each instance's lower bound
// is rec's, set from the same state, and no record of the run touches an
// upper bound (they are before tReq; at tReq, rec alone).
func (r *Replay) supplies(rec *Record) bool {
	r.gen++
	if r.gen == 0 { // wrapped: no instance may hold a stale mark
		for _, pm := range r.pmList {
			for _, c := range pm.icps {
				c.gen = 0
			}
		}
		r.gen = 1
	}
	for i := range rec.Sets {
		set := &rec.Sets[i]
		if set.Err != nil {
			continue
		}
		pm := r.pmAt(&r.supHint, i, set.PMID)
		if pm == nil {
			continue
		}
		singular := len(pm.icps) == 1 && pm.icps[0].inst == semantics.InNull
		if len(pm.hint) < len(set.Values) {
			pm.hint = append(pm.hint, make([]*icp, len(set.Values)-len(pm.hint))...)
		}
		for j := range set.Values {
			inst := set.Values[j].Inst
			c := pm.hint[j]
			if c == nil || c.inst != inst {
				c = pm.byInst[inst]
				pm.hint[j] = c
			}
			if c == nil && singular {
				c = pm.icps[0]
			}
			if c != nil {
				c.gen = r.gen
			}
		}
	}
	for _, pm := range r.pmList {
		for _, c := range pm.icps {
			if c.inresult && c.gen != r.gen {
				return false
			}
		}
	}
	return true
}

// sameInstances reports whether two value sets list the same instances in
// the same order.
func sameInstances(a, b []source.InstValue) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Inst != b[i].Inst {
			return false
		}
	}
	return true
}

// front returns the record at the position. With an empty window it reads
// the next record: one at or before tReq is returned as a view of the
// reader's record (direct: valid until the next read, consumed by the
// caller, never copied); a later one is copied into the window.
func (r *Replay) front(tReq float64) (w *winRec, direct bool, err error) {
	// A run of records at or before tReq whose last one holds every
	// instance they could change is passed over, unread but for that one
	// (sparse reading): it starts at the window's record when the window
	// holds only that one, a value record before tReq.
	if len(r.win) > 1 {
		return r.win[0], false, nil
	}
	var lead *winRec
	if len(r.win) == 1 {
		lead = r.win[0]
		if lead.mark || lead.t >= tReq || !r.feed.sparse {
			return lead, false, nil
		}
	}
	if !r.applyAll {
		after, minRun := math.Inf(-1), 2
		if lead != nil {
			after, minRun = lead.t, 1
		}
		n, tFirst, res, err := r.feed.skipRun(r.secsFn, tReq, after, minRun, r.suppliesFn)
		if err != nil {
			return nil, false, err
		}
		if res == runRefused {
			r.refused++
		}
		if res == runAccepted && lead != nil {
			n, tFirst = n+1, lead.t
			r.pop()
		}
		r.passed += n
		r.moved += n
		if r.trackMin && n > 0 {
			// the records passed over count as applied (their times never
			// go back, from tFirst)
			r.rollMin = min(r.rollMin, tFirst)
			r.positioned += n
		}
	}
	if len(r.win) > 0 {
		return r.win[0], false, nil
	}
	rec, ai, ok, err := r.feed.next()
	if err != nil || !ok {
		return nil, false, err
	}
	t := r.secs(rec.Time)
	if t <= tReq {
		r.view = winRec{t: t, mark: rec.Mark, sets: rec.Sets, ai: ai, vol: rec.Vol, off: rec.Off, time: rec.Time}
		return &r.view, true, nil
	}
	r.push(rec, ai)
	return r.win[0], false, nil
}

// searchForward reads forward from the position until every searching
// instance has an upper bound (or a mark), or the end; records at or before
// tReq move the position.
func (r *Replay) searchForward(tReq float64, forw int, seenMark *bool) error {
	done := 0
	i := 0
	// searching instances known to end (tLast, unchanged while searching)
	// stop searching at a record past their end
	ending := r.ending[:0]
	for _, c := range r.want {
		if c.search && c.tLast >= 0 {
			ending = append(ending, c)
		}
	}
	r.ending = ending
	forget := func(tThis float64) {
		k := 0
		for _, c := range ending {
			if !c.search {
				continue
			}
			if tThis >= c.tLast {
				c.search = false
				c.scNext = true
				done++
				continue
			}
			ending[k] = c
			k++
		}
		ending = ending[:k]
	}
	var probe *feed
	defer func() {
		if probe != nil {
			probe.close()
		}
	}()
	var pw, prev winRec
	direct, restricted := false, false
	for done < forw {
		var w *winRec
		// the probe reads on after the window's last record: once every
		// record of the window has been applied
		if probe == nil && len(r.win) > 0 && i >= len(r.win) && (i >= r.opts.Window || r.winValues >= windowValues) {
			prev = *r.win[len(r.win)-1]
			probe = &feed{archives: r.archives, keep: r.probeKeep(tReq, prev.t)}
			probe.seekPos(prev.ai, prev.vol, prev.off, prev.time)
			restricted = true
		}
		if probe != nil {
			rec, ai, ok, err := probe.next()
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			// used once, right away: a view of the probe's record, not a copy
			pw = winRec{t: r.secs(rec.Time), mark: rec.Mark, sets: rec.Sets, ai: ai, vol: rec.Vol, off: rec.Off, time: rec.Time}
			if restricted && pw.t < prev.t {
				// time went back in the file: read on from this record
				// with every metric, as probeKeep's premise is gone
				probe.close()
				probe = &feed{archives: r.archives, keep: r.follows}
				probe.seekPos(prev.ai, prev.vol, prev.off, prev.time)
				restricted = false
				continue
			}
			prev = pw
			w = &pw
		} else if i == 0 {
			var err error
			w, direct, err = r.front(tReq)
			if err != nil {
				return err
			}
			if w == nil {
				break
			}
		} else {
			var err error
			w, err = r.at(i)
			if err != nil {
				return err
			}
			if w == nil {
				break
			}
		}
		// a record before tReq moves the position, as in roll: its sets
		// that the next record repeats are superseded (see updateBounds).
		// The search goes on past it: only a record at or after tReq (or
		// a mark) ends a search, so the next record is applied right after.
		var next []source.ValueSet
		if probe == nil && i == 0 {
			next = r.successor(w, direct, tReq)
		}
		skipped := r.superseded
		r.updateBounds(w, tReq, true, &done, seenMark, next)
		r.searchSuperseded += r.superseded - skipped
		forget(w.t)
		switch {
		case probe != nil:
		case direct:
			direct = false // consumed in place
			r.moved++
			r.lastPos, r.lastPosMark = w.t, w.mark
		case w.t <= tReq && i == 0:
			r.lastPos, r.lastPosMark = w.t, w.mark
			r.pop()
			r.moved++
		default:
			i++
		}
	}
	for _, c := range r.want {
		if !c.search && !(c.next.T < tReq) {
			continue
		}
		if c.search && c.next.T < tReq && (c.tLast < 0 || tReq < c.tLast) {
			c.tLast = tReq
			c.scNext = true
		}
		c.search = false
	}
	return nil
}

// probeKeep chooses the metrics a probe decodes: its records are all at or
// after tFrom (> tReq; searchForward falls back to every metric if time
// goes back in the file), where updateBounds changes an instance only when it
// is searching, or its next bound is before tReq (unset included) or at or
// after tFrom, or at a <mark> (a probe returns every mark). The other
// instances keep their bounds whatever the probe reads, so the value sets
// of metrics made only of them are skipped undecoded: a search for a few
// rare or vanished instances reads the rest of the timeline at the cost of
// skipping it.
func (r *Replay) probeKeep(tReq, tFrom float64) func(semantics.PMID) bool {
	keep := make(map[semantics.PMID]bool, len(r.pms))
	for p, pm := range r.pms {
		if pm == nil {
			continue
		}
		for _, c := range pm.icps {
			if c.inresult && (c.search || c.next.T < tReq || c.next.T >= tFrom) {
				keep[p] = true
				break
			}
		}
	}
	return func(p semantics.PMID) bool { return keep[p] }
}

// updateBounds is libpcp's update_bounds for one record (forw: rolling or
// searching forwards, else the initial positioning).
//
// Moving the position (roll, or searchForward at the position), next holds
// the sets of the record applied right after this one (see successor;
// tThis < tReq, tThis <= tNext <= tReq, not a mark): a set
// of this record whose metric and instances all come again in next is
// skipped, as next leaves every such instance c as it would after both:
//   - c.prior.T in (tThis, tReq]: this record changes nothing;
//   - c.prior.T <= tThis: this record sets the lower bound, next overwrites
//     it, and neither touches the upper one (c.prior.T < tReq);
//   - c.prior.T > tReq: this record moves it to the upper bound if earlier
//     than that one and sets tThis; next, from the state before, makes the
//     same move and sets tNext; from the state after, it only sets tNext.
//
// In each case next's own upper-bound step (when tNext == tReq) then sees
// the same state.
func (r *Replay) updateBounds(w *winRec, tReq float64, forw bool, done *int, seenMark *bool, next []source.ValueSet) {
	tThis := w.t
	if w.mark {
		for _, c := range r.want {
			if tThis <= tReq && (tThis >= c.prior.T || c.prior.T > tReq) {
				c.prior.T, c.prior.Kind, c.scPrior = tThis, semantics.BoundMark, false
				if seenMark != nil {
					*seenMark = true
				}
			}
			if tThis >= tReq && (tThis <= c.next.T || c.next.T < 0 || c.next.T < tReq) {
				c.next.T, c.next.Kind, c.scNext = tThis, semantics.BoundMark, false
				if c.search && done != nil {
					c.search = false
					*done++
					c.scNext = true
				}
			}
		}
		return
	}
	for i := range w.sets {
		set := &w.sets[i]
		pm := r.pmAt(&r.setHint, i, set.PMID)
		if pm == nil || set.Err != nil {
			continue
		}
		if i < len(next) && next[i].PMID == set.PMID && next[i].Err == nil && sameInstances(next[i].Values, set.Values) {
			r.superseded++
			continue
		}
		if len(pm.hint) < len(set.Values) {
			pm.hint = append(pm.hint, make([]*icp, len(set.Values)-len(pm.hint))...)
		}
		for j := range set.Values {
			iv := &set.Values[j]
			// records list instances in the same order time after time:
			// remember where each was, before asking the map
			c := pm.hint[j]
			if c == nil || c.inst != iv.Inst {
				c = pm.byInst[iv.Inst]
				pm.hint[j] = c
			}
			if c == nil {
				if len(pm.icps) == 1 && pm.icps[0].inst == semantics.InNull {
					c = pm.icps[0]
				} else {
					continue
				}
			}
			if !c.inresult {
				continue
			}
			if tThis <= tReq && (c.prior.T > tReq || tThis >= c.prior.T) {
				if c.prior.T < c.next.T && c.prior.T >= tReq {
					c.next.T, c.next.Kind, c.scNext = c.prior.T, c.prior.Kind, false
					setValue(&c.next.V, c.prior.V, &c.bNext)
				}
				c.prior.T, c.prior.Kind = tThis, semantics.BoundValue
				setValue(&c.prior.V, iv.Value, &c.bPrior)
			}
			if tThis >= tReq && (c.next.T < tReq || tThis <= c.next.T) {
				if c.prior.T < c.next.T && c.next.T <= tReq {
					c.prior.T, c.prior.Kind, c.scPrior = c.next.T, c.next.Kind, false
					setValue(&c.prior.V, c.next.V, &c.bPrior)
				}
				c.next.T, c.next.Kind = tThis, semantics.BoundValue
				setValue(&c.next.V, iv.Value, &c.bNext)
				if forw && c.search && done != nil {
					c.search = false
					*done++
					c.scNext = true
				}
			}
		}
	}
}

// setValue copies v into *dst, a byte payload into *buf (reused); a
// numeric value leaves *buf alone (it is in another cache line).
func setValue(dst *semantics.Value, v semantics.Value, buf *[]byte) {
	if t := v.Type(); t.IsNumeric() {
		dst.SetNumeric(t, v.Bits())
		return
	}
	*buf = append((*buf)[:0], v.Bytes()...)
	dst.SetBytes(v.Type(), *buf)
}

// readOne appends the next record of the timeline to the window.
func (r *Replay) readOne() (bool, error) {
	rec, ai, ok, err := r.feed.next()
	if err != nil || !ok {
		return false, err
	}
	r.push(rec, ai)
	return true, nil
}

// push copies a record into the window.
func (r *Replay) push(rec *Record, ai int) {
	var w *winRec
	if n := len(r.spare); n > 0 {
		w = r.spare[n-1]
		r.spare = r.spare[:n-1]
	} else {
		w = &winRec{}
	}
	r.fillWin(w, rec, ai)
	r.win = append(r.win, w)
	r.winValues += len(w.vals)
}

// fillWin copies the sets of rec that belong to followed metrics into w.
func (r *Replay) fillWin(w *winRec, rec *Record, ai int) {
	w.time = rec.Time
	w.t = r.secs(rec.Time)
	w.mark = rec.Mark
	w.ai, w.vol, w.off = ai, rec.Vol, rec.Off
	w.sets = w.sets[:0]
	w.vals = w.vals[:0]
	w.buf = w.buf[:0]
	for i, s := range rec.Sets {
		if r.pmAt(&r.winHint, i, s.PMID) == nil {
			continue
		}
		w.vals = append(w.vals, s.Values...)
		for _, v := range s.Values {
			if !v.Value.Type().IsNumeric() {
				w.buf = append(w.buf, v.Value.Bytes()...)
			}
		}
	}
	vi, bi := 0, 0
	for i, s := range rec.Sets {
		if r.winHint[i].pm == nil { // as the loop above found
			continue
		}
		vals := w.vals[vi : vi+len(s.Values) : vi+len(s.Values)]
		for j := range vals {
			if v := vals[j].Value; !v.Type().IsNumeric() {
				n := len(v.Bytes())
				vals[j].Value.SetBytes(v.Type(), w.buf[bi:bi+n:bi+n])
				bi += n
			}
		}
		vi += len(s.Values)
		w.sets = append(w.sets, source.ValueSet{PMID: s.PMID, Err: s.Err, Values: vals})
	}
}

// hashThreshold is libpcp's HASH_THRESHOLD: instance domains that ever hold
// this many instances get birth and death times (time_caliper).
const hashThreshold = 16

// caliper gives each instance of a domain that ever holds hashThreshold
// instances its birth and death times (libpcp's time_caliper), or nil.
// Birth is the time of the first indom record holding an instance, death
// the time of the record after the last one holding it (+Inf if that is
// the last record). The records are taken in time order as changes to the
// set of instances: a delta on the record before it by its changes alone,
// so that the cost is that of the .meta records, not records x instances.
func (r *Replay) caliper(indom semantics.InDom) map[int32][2]float64 {
	type snap struct {
		t    float64
		node *indomNode
		m    *meta
	}
	var snaps []snap
	for _, a := range r.archives {
		m := a.state().meta
		for _, s := range m.indoms[indom] {
			snaps = append(snaps, snap{t: r.secs(s.t), node: s.node, m: m})
		}
	}
	sort.SliceStable(snaps, func(i, j int) bool { return snaps[i].t < snaps[j].t })
	out := map[int32][2]float64{}
	cur := map[int32]bool{}
	add := func(id int32, t float64) {
		cur[id] = true
		c, ok := out[id]
		if !ok {
			c[0] = t
		}
		c[1] = math.Inf(1)
		out[id] = c
	}
	remove := func(id int32, t float64) {
		delete(cur, id)
		c := out[id]
		c[1] = t
		out[id] = c
	}
	big := false
	var prev *indomNode
	for _, s := range snaps {
		if s.node.base != nil && s.node.base == prev {
			for _, op := range s.node.ops {
				switch {
				case op.del && cur[op.in.ID]:
					remove(op.in.ID, s.t)
				case !op.del && !cur[op.in.ID]:
					add(op.in.ID, s.t)
				}
			}
		} else {
			next := map[int32]bool{}
			for _, in := range s.m.materialize(s.node) {
				next[in.ID] = true
			}
			for id := range cur {
				if !next[id] {
					remove(id, s.t)
				}
			}
			for id := range next {
				if !cur[id] {
					add(id, s.t)
				}
			}
		}
		prev = s.node
		if len(cur) >= hashThreshold {
			big = true
		}
	}
	if !big {
		return nil
	}
	return out
}

// answer builds the result from the bounds: the availability check and the
// value choice of __pmLogFetchInterp.
func (r *Replay) answer(pmids []semantics.PMID, pms []*pmState, tReq float64, seenMark bool, res *source.Result) {
	if cap(res.Sets) < len(pmids) {
		sets := make([]source.ValueSet, len(pmids))
		copy(sets, res.Sets)
		res.Sets = sets
	}
	res.Sets = res.Sets[:len(pmids)]
	for i, p := range pmids {
		vs := &res.Sets[i]
		vs.PMID, vs.Err = p, nil
		vals := vs.Values[:0]
		pm := pms[i]
		if pm == nil {
			vs.Err = semantics.ErrPMIDLog
			vs.Values = vals
			continue
		}
		d := pm.desc
		numval := pm.numval
		for _, c := range pm.order {
			if !c.inresult {
				continue
			}
			if d.Sem == semantics.SemDiscrete {
				if c.prior.Kind != semantics.BoundValue || c.prior.T > tReq {
					c.inresult = false
					numval--
					continue
				}
			} else {
				if c.prior.Kind != semantics.BoundValue || c.prior.T > tReq || c.next.Kind != semantics.BoundValue || c.next.T < tReq {
					c.inresult = false
					numval--
					continue
				}
				if d.Sem == semantics.SemCounter {
					if !d.Type.IsNumeric() {
						pm.typeErr = true
						continue
					}
					if seenMark && pm.lastNumval > 0 {
						c.inresult = false
						numval--
						continue
					}
				}
			}
			v, ok := interpolateAt(d, r.opts.Interp, &c.prior, &c.next, tReq)
			if !ok {
				continue
			}
			vals = append(vals, source.InstValue{Inst: c.inst, Value: v})
		}
		vs.Values = vals
		if pm.typeErr {
			vs.Err = semantics.ErrType
			vs.Values = vals[:0]
			pm.lastNumval = int(semantics.ErrType)
			continue
		}
		pm.lastNumval = numval
	}
}

// interpolateAt chooses the value of an instance that passed the
// availability check. Strings and aggregates are the prior bound's value as
// is, even when the next bound is at tReq (libpcp copies v_prior).
func interpolateAt(d semantics.Desc, rule semantics.InterpRule, prior, next *semantics.Bound, tReq float64) (semantics.Value, bool) {
	if !d.Type.IsNumeric() {
		if prior.T >= 0 && prior.Kind == semantics.BoundValue {
			return prior.V, true
		}
		return semantics.Value{}, false
	}
	return semantics.Interpolate(d.Type, d.Sem, rule, prior, next, tReq)
}

// feed reads the records of the timeline in order, with a <mark> record
// synthesized between consecutive archives, 1 ms after the last record of
// the earlier one (as pmlogextract marks a gap).
type feed struct {
	archives []*Archive
	keep     func(semantics.PMID) bool // metrics the readers decode
	ai       int
	r        *Reader
	started  bool
	last     time.Time
	mark     Record
	// sparse: plain volumes are read record by record, so that runs of
	// records can be passed over (see Replay.front)
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
func (f *feed) seekEntry(ai int, e IndexEntry) {
	f.ai = ai
	a := f.archives[ai]
	r := f.reader(ai)
	a.seek(r, a.state(), e)
	f.r = r
	f.started = true
}

// reader returns a Reader over archive ai from its start, decoding only
// the followed metrics.
func (f *feed) reader(ai int) *Reader {
	r := f.archives[ai].Records()
	r.sparse = f.sparse
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
	a := f.archives[ai]
	if vol < 0 { // a synthesized mark: the next archive's start
		f.r = f.reader(ai)
		return
	}
	r := f.reader(ai)
	st := a.state()
	for vi, v := range st.vols {
		if v.num == vol {
			r.vi, r.start = vi, off
			break
		}
	}
	f.r = r
	r.Next() // the record itself
}

// next returns the next record of the timeline, valid until the following
// call; at the end, ok is false and a later call tries again (the archive
// may grow).
func (f *feed) next() (*Record, int, bool, error) {
	rec, ai, ok, err := f.read()
	if ok {
		f.lastAi, f.lastVol, f.lastOff, f.lastTime, f.delivered = ai, rec.Vol, rec.Off, rec.Time, true
	}
	return rec, ai, ok, err
}

// goSparse reads on record by record, from the record after the last one
// next returned.
func (f *feed) goSparse() bool {
	if f.sparse || !f.delivered || !f.plainAt(f.lastAi, f.lastVol) || (f.r != nil && f.r.err != nil) {
		return false
	}
	if f.r != nil {
		f.r.Close()
	}
	f.sparse = true
	f.seekPos(f.lastAi, f.lastVol, f.lastOff, f.lastTime)
	return true
}

// plainAt reports whether volume vol of archive ai is a plain file: sparse
// reading passes over records of plain volumes only (a compressed one is
// read whole).
func (f *feed) plainAt(ai, vol int) bool {
	for _, v := range f.archives[ai].state().vols {
		if v.num == vol {
			return compressionOf(v.path) == ""
		}
	}
	return false
}

// goDense reads on through the volume readers' windows from the feed's
// position (the record after the last one next returned): the fetches use
// most records.
func (f *feed) goDense() bool {
	if !f.sparse {
		return false
	}
	f.sparse = false
	if f.r != nil {
		f.r.setSparse(false)
	}
	return true
}

// skipRun passes over the records of a run at the position that applying
// the run's last record alone makes superseded (see Reader.skipRun),
// returning how many; only a sparse feed does.
func (f *feed) skipRun(secs func(time.Time) float64, tReq, after float64, minRun int, ok func(*Record) bool) (int, float64, runResult, error) {
	if !f.sparse || f.r == nil {
		return 0, 0, runNone, nil
	}
	return f.r.skipRun(secs, tReq, after, minRun, ok)
}

func (f *feed) read() (*Record, int, bool, error) {
	if !f.started {
		f.r = f.reader(0)
		f.started = true
	}
	for {
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
			f.mark = Record{Time: f.last.Add(time.Millisecond), Mark: true, Vol: -1}
			return &f.mark, f.ai, true, nil
		}
	}
}

func (f *feed) close() {
	if f.r != nil {
		f.r.Close()
		f.r = nil
	}
}

package pmcd

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// Options configure a Source.
type Options struct {
	// Selection chooses the metrics exported (all by default).
	Selection Selection
	// Timeout bounds connecting and each fetch with the instance domains
	// it reads (default 5 s): a hung PMDA costs a scrape at most this
	// long, then the connection is dropped.
	Timeout time.Duration
	// MetadataTimeout bounds reading the metadata (default 60 s), which
	// happens off the scrape path.
	MetadataTimeout time.Duration
	// MaxPDU bounds a reply's size (default DefaultMaxPDU).
	MaxPDU int
	// Backoff is the wait before each reconnection attempt after a
	// failure, the last repeated (default 1, 2, 4, 8, 16, 30 s).
	Backoff []time.Duration
	// Logger receives a line per metadata refresh, and (debug) per change
	// of connection state (default: discarded).
	Logger *slog.Logger
	// SeriesLimit bounds the values a fetch serves and the instances of
	// an instance domain kept (default DefaultSeriesLimit, negative: no
	// limit), as Prometheus's sample_limit bounds a scrape: the rest is
	// left out (source.Limited), with a log line when the cutting starts
	// and one when it stops.
	SeriesLimit int
	// Security is the TLS and SASL authentication to use (secure.go; nil:
	// neither).
	Security *Security
	// ContextApart keeps pmcd's context labels out of the metrics' merged
	// labels (source.ContextApart: ContextLabels has them), so that pmcds
	// differing only in them share their metadata (shared.go).
	ContextApart bool
	// Loads, when not nil, bounds the metadata reads under way at once
	// across the sources given the same channel (its capacity): a read
	// waits for a place before it dials. A fleet's first scrapes would
	// otherwise read every pmcd's metadata at once, each holding its
	// replies until it ends.
	Loads chan struct{}
}

// DefaultSeriesLimit is the default Options.SeriesLimit: about twice the
// series of a busy host's full pmcd (proc included), and what serving
// costs about 40 MB for.
const DefaultSeriesLimit = 100_000

// instanceRefresh is how often the instance domains of the fetched metrics
// are read again even when no unknown instance shows up.
const instanceRefresh = time.Minute

var defaultBackoff = []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second}

// ErrNotConnected is the error of every value set fetched while pmcd cannot
// be reached.
var ErrNotConnected = semantics.PMError(-12391) // PM_ERR_NOTCONN

// Source is a source.Source over one pmcd. It is safe for concurrent use;
// calls are serialized.
type Source struct {
	ep   Endpoint
	opts Options
	log  *slog.Logger

	mu    sync.Mutex
	c     *client
	md    *metadata
	epoch uint64
	// stale says what pmcd flagged as changed: the next Metrics call
	// starts reading the metadata again (see load.go).
	stale staleness
	// loads counts the metadata reads by kind.
	loads loadCounts
	// loading is closed when the metadata read under way (in the
	// background, see startLoad) ends; nil when none is.
	loading chan struct{}
	closed  bool
	down    error // why pmcd cannot be reached; nil when connected
	// downFirst is the first failure since the last successful fetch.
	downFirst error
	retryAt   time.Time
	retryT    *time.Timer
	// fails counts the failures since the last successful fetch: the
	// step of the reconnections' backoff.
	fails int
	// reloadAt is when a metadata read after a change may start, and
	// reloadStep the step of its backoff (see reloaded).
	reloadAt   time.Time
	reloadStep int
	// flagged says the fetch under way saw change flags; changeLogged
	// that a change was logged since the last fetch without flags.
	flagged, changeLogged bool
	// malformedLogged is the count of malformed labels last logged;
	// cutting says the last fetch's values were cut by the series limit.
	malformedLogged int
	cutting         bool
	started         starts

	// fetch state, reused
	rd        resultDecoder
	bufs      [][]byte
	req       []semantics.PMID // the PMIDs of the last fetch
	types     []semantics.Type // their types (for INSITU values)
	indoms    []semantics.InDom
	prevInst  []int32 // instance ids of the last fetch, per set
	prevStart []int32
	nextInst  []int32
	nextStart []int32
	refresh   []semantics.InDom
	// instAt is when every instance domain was last read: they are read
	// again every instanceRefresh, for renamed and vanished instances
	// (pmcd flags no instance change).
	instAt time.Time
	// failing is the error code of each metric pmcd answered with an
	// error at the last fetch; errTotal counts such answers.
	failing  map[semantics.PMID]int32
	errTotal uint64
}

// New returns a Source for the pmcd of spec (see ParseSpec) without
// connecting: the first Connect, Metrics or Fetch does.
func New(spec string, opts Options) (*Source, error) {
	ep, err := ParseSpec(spec)
	if err != nil {
		return nil, err
	}
	ep.sec = opts.Security
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	if opts.MetadataTimeout <= 0 {
		opts.MetadataTimeout = 60 * time.Second
	}
	if opts.MaxPDU <= 0 {
		opts.MaxPDU = DefaultMaxPDU
	}
	if len(opts.Backoff) == 0 {
		opts.Backoff = defaultBackoff
	}
	switch {
	case opts.SeriesLimit == 0:
		opts.SeriesLimit = DefaultSeriesLimit
	case opts.SeriesLimit < 0:
		opts.SeriesLimit = 0
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Source{ep: ep, opts: opts, log: log, failing: map[semantics.PMID]int32{}}
	s.rd.peer = ep.String()
	s.rd.limit = opts.SeriesLimit
	s.down = fmt.Errorf("pmcd at %s: not connected yet", ep)
	return s, nil
}

// Open is New and Connect: a source whose pmcd answered.
func Open(spec string, opts Options) (*Source, error) {
	s, err := New(spec, opts)
	if err != nil {
		return nil, err
	}
	if err := s.Connect(); err != nil {
		return nil, err
	}
	return s, nil
}

// Endpoint returns where the source connects.
func (s *Source) Endpoint() Endpoint { return s.ep }

// Connect connects to pmcd now (if not connected) and reads the metadata.
func (s *Source) Connect() error { return s.ConnectBy(time.Time{}) }

// ConnectBy is Connect waiting no later than deadline (zero: until the
// read ends). A read still under way then goes on in the background, and
// the source stays down until it completes: a pmcd that answers the
// handshake but stalls its metadata cannot hold up a caller for
// MetadataTimeout.
func (s *Source) ConnectBy(deadline time.Time) error {
	s.mu.Lock()
	if s.c == nil {
		s.startLoad()
	}
	done := s.loading
	s.mu.Unlock()
	if done != nil {
		if deadline.IsZero() {
			<-done
		} else {
			t := time.NewTimer(time.Until(deadline))
			defer t.Stop()
			select {
			case <-done:
			case <-t.C:
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c == nil {
		if s.loading != nil {
			return fmt.Errorf("pmcd at %s: still reading its metadata (continuing in the background)", s.ep)
		}
		return s.down
	}
	return nil
}

// setDown records that pmcd cannot be reached and when to try again.
func (s *Source) setDown(now time.Time, err error) {
	if s.c != nil {
		s.c.close()
		s.c = nil
	}
	if s.down == nil || s.down.Error() != err.Error() {
		// the bridge logs the change of state once (Status); this is detail
		s.log.Debug("pmcd unreachable", "pmcd", s.ep.String(), "err", err)
	}
	if s.fails == 0 {
		s.downFirst = err
	}
	// Status says why the source went down until a fetch succeeds again:
	// the failures that follow (other parts of a truncated reply, refused
	// connections) are the same state, not new ones
	s.down = s.downFirst
	wait := s.opts.Backoff[min(s.fails, len(s.opts.Backoff)-1)]
	s.retryAt = now.Add(wait)
	s.fails++
	if s.retryT != nil {
		s.retryT.Stop()
	}
	if !s.closed {
		s.retryT = time.AfterFunc(wait, s.retry)
	}
}

// ensure starts connecting (in the background) when down and the backoff
// has passed; false when down.
func (s *Source) ensure(now time.Time) bool {
	if s.c == nil && !now.Before(s.retryAt) {
		s.startLoad()
	}
	return s.c != nil
}

// Metrics returns the selected metrics pmcd exports, in name order; the
// last ones known while pmcd cannot be reached. Metadata flagged as changed
// by pmcd starts being read again in the background: these are the
// previous ones until that read is done (Epoch grows then).
func (s *Source) Metrics() []source.Metric {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.ensure(now) && s.stale != 0 && !now.Before(s.reloadAt) {
		s.startLoad()
	}
	if s.md == nil {
		return nil
	}
	return s.md.metrics
}

// Instances returns the instances of an instance domain, in id order.
func (s *Source) Instances(id semantics.InDom) []source.Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.md == nil {
		return nil
	}
	if in := s.md.indoms[id]; in != nil {
		return in.insts
	}
	return nil
}

// Release drops the reply buffers and decoded values kept for the next
// fetch (source.Releaser): the values a Result got from the last Fetch are
// not to be read after it.
func (s *Source) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bufs = nil
	s.rd.vals, s.rd.starts = nil, nil
	s.nextInst, s.nextStart = nil, nil
	if s.c != nil {
		s.c.rbuf, s.c.w.B = nil, nil
		s.c.releaseReader()
	}
}

// ContextLabels returns pmcd's context labels when Options.ContextApart
// keeps them out of the metrics' labels (source.ContextApart).
func (s *Source) ContextLabels() (semantics.LabelSet, bool) {
	if !s.opts.ContextApart {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.md == nil {
		return nil, true
	}
	return s.md.context, true
}

// Epoch numbers the metadata read: it grows at every (re)read.
func (s *Source) Epoch() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epoch
}

// Status reports the source down, with the reason, while pmcd cannot be
// reached.
func (s *Source) Status(time.Time) source.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down != nil {
		return source.Status{Reason: source.ReasonDown, Detail: s.down.Error(), Lag: -1}
	}
	return source.Status{Lag: -1}
}

// MetricErrors returns how many metrics pmcd answered with an error at the
// last fetch, by error, and how many such answers there were in all.
func (s *Source) MetricErrors() (last map[semantics.PMError]int, total uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	last = map[semantics.PMError]int{}
	for _, code := range s.failing {
		last[semantics.PMError(code)]++
	}
	return last, s.errTotal
}

// Fetch fetches pmids from pmcd (t is ignored: pmcd answers the present).
// While pmcd cannot be reached, every set has ErrNotConnected and Status
// says why; a connection lost during the fetch is dropped and retried
// after a backoff. Fetch itself fails only for a bad request.
func (s *Source) Fetch(_ time.Time, pmids []semantics.PMID, res *source.Result) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.ensure(now) {
		defer release(&s.c.dropped)
		deadline := now.Add(s.opts.Timeout)
		s.flagged = false
		err := s.fetchLocked(pmids, res, deadline)
		if err == nil {
			s.fails = 0
			s.down = nil
			if !s.flagged {
				s.quiet()
			}
			s.reportCut()
			s.afterFetch(res, deadline)
			return nil
		}
		s.setDown(time.Now(), err)
	}
	res.Time = now
	res.Sets = res.Sets[:0]
	for _, id := range pmids {
		res.Sets = append(res.Sets, source.ValueSet{PMID: id, Err: ErrNotConnected})
	}
	return nil
}

// fetchLocked sends HIGHRES_FETCH (FETCH for old pmcds) PDUs of at most
// pmcd's request size for pmids and decodes the replies into res, all
// within deadline.
func (s *Source) fetchLocked(pmids []semantics.PMID, res *source.Result, deadline time.Time) error {
	if !slices.Equal(s.req, pmids) {
		s.req = append(s.req[:0], pmids...)
		// sized once: a pooled /probe target keeps them between probes
		s.types = slices.Grow(s.types[:0], len(pmids))
		s.indoms = slices.Grow(s.indoms[:0], len(pmids))
		for _, id := range pmids {
			t, in := semantics.Type32, semantics.InDomNull
			if s.md != nil {
				if d := s.md.descs[id]; d != nil {
					t, in = d.Type, d.InDom
				}
			}
			s.types = append(s.types, t)
			s.indoms = append(s.indoms, in)
		}
		s.prevInst, s.prevStart = s.prevInst[:0], s.prevStart[:0]
	}
	return s.c.fetch(deadline, pmids, s.types, &s.rd, &s.bufs, res, s.flag)
}

// flag records pmcd's state-change flags: metadata is read again (in the
// background) at the next Metrics call, as much of it as the flags call for.
func (s *Source) flag(code int32) {
	if code != 0 {
		s.flagged = true
	}
	var what staleness
	if code&(pmcdAgentChange|pmcdHostnameChange) != 0 {
		what |= staleAll
	}
	if code&pmcdNamesChange != 0 {
		what |= staleNames
	}
	if code&pmcdLabelChange != 0 {
		what |= staleLabels
	}
	if what&^s.stale != 0 {
		s.stale |= what
		level := slog.LevelInfo
		switch {
		case what == staleNames:
			level = slog.LevelDebug // frequent (MMV files), mostly outside the selection
		case s.changeLogged:
			level = slog.LevelDebug // logged once until a fetch comes without a flag
		default:
			s.changeLogged = true
		}
		s.log.Log(context.Background(), level, "pmcd reports a change; metadata will be read again", "pmcd", s.ep.String(), "flags", fmt.Sprintf("0x%x", code))
	}
}

// afterFetch counts metrics answered with errors and reads again, within
// the fetch's deadline, the instance domains whose values name instances
// not known yet.
func (s *Source) afterFetch(res *source.Result, deadline time.Time) {
	s.nextInst, s.nextStart = s.nextInst[:0], s.nextStart[:0]
	s.refresh = s.refresh[:0]
	same := len(s.prevStart) == len(res.Sets)+1
	for i := range res.Sets {
		set := &res.Sets[i]
		s.nextStart = append(s.nextStart, int32(len(s.nextInst)))
		if set.Err != nil {
			var code int32
			if pe, ok := set.Err.(semantics.PMError); ok {
				code = int32(pe)
			}
			if s.failing[set.PMID] != code {
				s.failing[set.PMID] = code
			}
			s.errTotal++
			continue
		}
		if len(s.failing) > 0 {
			delete(s.failing, set.PMID)
		}
		in := s.indoms[i]
		if in == semantics.InDomNull {
			continue
		}
		vals := set.Values
		// a set listing the instances it listed last time needs no check
		changed := !same
		if same {
			prev := s.prevInst[s.prevStart[i]:s.prevStart[i+1]]
			changed = len(prev) != len(vals)
			for j := 0; !changed && j < len(vals); j++ {
				changed = prev[j] != vals[j].Inst
			}
		}
		for j := range vals {
			s.nextInst = append(s.nextInst, vals[j].Inst)
		}
		if !changed || s.md == nil {
			continue
		}
		known := s.md.indoms[in]
		if known != nil && known.cut > 0 {
			continue // values of instances left out are expected
		}
		for j := range vals {
			if known == nil {
				s.addRefresh(in)
				break
			}
			if !known.has(vals[j].Inst) {
				s.addRefresh(in)
				break
			}
		}
	}
	s.nextStart = append(s.nextStart, int32(len(s.nextInst)))
	if now := time.Now(); now.Sub(s.instAt) > instanceRefresh {
		s.instAt = now
		// only of sets fetched: their agents have this connection's
		// profile for the instance labels (profile.go)
		for i, in := range s.indoms {
			if in != semantics.InDomNull && res.Sets[i].Err == nil {
				s.addRefresh(in)
			}
		}
	}
	s.prevInst, s.nextInst = s.nextInst, s.prevInst
	s.prevStart, s.nextStart = s.nextStart, s.prevStart
	if len(s.refresh) > 0 {
		if err := s.readInstances(s.refresh, deadline); err != nil {
			s.setDown(time.Now(), err)
		} else {
			s.reportMalformed()
		}
	}
}

func (s *Source) addRefresh(in semantics.InDom) {
	for _, x := range s.refresh {
		if x == in {
			return
		}
	}
	s.refresh = append(s.refresh, in)
}

// readInstances reads instance domains again (with their instance labels)
// into the metadata.
func (s *Source) readInstances(indoms []semantics.InDom, deadline time.Time) error {
	return s.c.instances(deadline, indoms, func(in semantics.InDom, insts []source.Instance, cut int, sets []labelSet, labelled bool) {
		var m map[int32]semantics.LabelSet
		if labelled {
			s.md.noteMalformed(labelInstances, uint32(in), sets)
			m = make(map[int32]semantics.LabelSet, len(sets))
			for _, ls := range sets {
				m[ls.inst] = ls.labels
			}
		}
		s.md.setInstances(in, insts, m)
		s.md.indoms[in].cut = cut
	})
}

// reportCut logs when the series limit starts and stops cutting a
// fetch's values. s.mu is held.
func (s *Source) reportCut() {
	switch cut := s.rd.cut; {
	case cut > 0 && !s.cutting:
		s.log.Warn("pmcd sends more values than the series limit: the rest are left out", "pmcd", s.ep.String(), "limit", s.opts.SeriesLimit, "left_out", cut)
	case cut == 0 && s.cutting:
		s.log.Info("pmcd's values are within the series limit again", "pmcd", s.ep.String(), "limit", s.opts.SeriesLimit)
	}
	s.cutting = s.rd.cut > 0
}

// LeftOut says what the source leaves out of what pmcd sends: malformed
// labels, and values and instances beyond the series limit.
func (s *Source) LeftOut() source.LeftOut {
	s.mu.Lock()
	defer s.mu.Unlock()
	lo := source.LeftOut{SeriesLimit: s.opts.SeriesLimit, SeriesCut: s.rd.cut}
	if s.md != nil {
		lo.MalformedLabels = s.md.malformedLabels()
		for _, in := range s.md.indoms {
			lo.InstancesCut += in.cut
		}
	}
	return lo
}

// Close closes the connection.
func (s *Source) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c != nil {
		s.c.close()
		s.c = nil
	}
	if s.retryT != nil {
		s.retryT.Stop()
	}
	s.closed = true
	s.down = errClosed
	return nil
}

var (
	_ source.Source       = (*Source)(nil)
	_ source.Monitored    = (*Source)(nil)
	_ source.Generations  = (*Source)(nil)
	_ source.Epoched      = (*Source)(nil)
	_ source.Limited      = (*Source)(nil)
	_ source.ContextApart = (*Source)(nil)
	_ source.Releaser     = (*Source)(nil)
)

// Ping reports whether pmcd answers the handshake now (without reading its
// metadata).
func (s *Source) Ping() error {
	c, err := dial(s.ep, s.opts.Timeout, s.opts.MaxPDU)
	if err != nil {
		return err
	}
	c.close()
	return nil
}

package pmcd

import (
	"errors"
	"maps"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
)

// Connecting and reading the metadata happen off the scrape path: a
// goroutine dials a new connection, reads the metadata (and when the
// counters started) within MetadataTimeout, and only then installs it, so
// that a scrape never waits on metadata. Until a first connection is
// installed the source is down; a reload after pmcd flagged a change
// (on a second connection) leaves the previous metadata and connection
// serving scrapes meanwhile.

// errClosed is a closed source's state.
var errClosed = errors.New("closed")

// staleness is what pmcd flagged as changed.
type staleness uint8

const (
	staleAll    staleness = 1 << iota // agents or the hostname
	staleLabels                       // labels
	staleNames                        // the namespace
)

// startLoad starts reading pmcd's metadata on a new connection, unless a
// read is already under way: all of it unless connected and pmcd flagged
// only label or namespace changes (see load). s.mu is held.
func (s *Source) startLoad() {
	if s.loading != nil || s.closed {
		return
	}
	var prev *metadata
	if s.c != nil && s.md != nil && s.stale != 0 && s.stale&staleAll == 0 {
		// a snapshot: scrapes may read new instances into s.md meanwhile
		snap := *s.md
		snap.indoms = maps.Clone(s.md.indoms)
		snap.malformed = maps.Clone(s.md.malformed)
		prev = &snap
	}
	done := make(chan struct{})
	s.loading = done
	what := s.stale
	s.stale = 0
	// a pmcd that answered before and now accepts the connection but
	// does not greet is stopped or busy: waiting for its greeting (off
	// the scrape path) reconnects as soon as it answers again, where a
	// new attempt at every backoff step would leave gaps of up to 30 s
	wait := s.opts.Timeout
	if s.md != nil {
		wait = s.opts.MetadataTimeout
	}
	go s.loadAsync(done, prev, what, wait)
}

// loadAsync dials pmcd (waiting at most wait for the connection and the
// handshake), reads its metadata and installs both; on failure the
// source is down (when it had no connection) or keeps its previous
// metadata and tries again after a backoff.
func (s *Source) loadAsync(done chan struct{}, prev *metadata, what staleness, wait time.Duration) {
	defer close(done)
	if l := s.opts.Loads; l != nil {
		l <- struct{}{}
		defer func() { <-l }()
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	var c *client
	err := errClosed
	if !closed {
		c, err = dial(s.ep, wait, s.opts.MaxPDU)
	}
	if err == nil {
		c.limit, c.fetchTimeout = s.opts.SeriesLimit, s.opts.Timeout
	}
	var md *metadata
	var kind loadKind
	var st *starts // nil: unchanged (a label or namespace change)
	if err == nil {
		deadline := time.Now().Add(s.opts.MetadataTimeout)
		if md, kind, err = s.load(c, deadline, prev, what); err == nil && prev == nil {
			st = new(starts)
			*st, err = readStarts(c, deadline)
		}
		release(&c.dropped)
		if err != nil {
			c.close()
		} else {
			// the buffers of the pipelined metadata requests and their
			// replies: a fetch's are a few KiB
			if cap(c.w.B) > 16<<10 {
				c.w.B = nil
			}
			if cap(c.rbuf) > 16<<10 {
				c.rbuf = nil
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loading = nil
	now := time.Now()
	switch {
	case s.closed:
		if err == nil {
			c.close()
		}
	case prev != nil && s.c == nil:
		// the connection was lost meanwhile: pmcd may have restarted,
		// so prev's names and descriptors may be wrong: read all
		if err == nil {
			c.close()
		}
		s.startLoad()
	case err != nil && s.c == nil:
		s.setDown(now, err)
	case err != nil:
		s.stale |= what
		s.reloaded(now)
		s.log.Warn("reading pmcd's metadata again failed; the previous metadata is kept", "pmcd", s.ep.String(), "err", err)
	case md == prev:
		// the selected names and their PMIDs are unchanged: nothing to
		// install, the metadata and its epoch are kept
		c.close()
		s.loads.add(kind)
		s.reloaded(now)
		s.log.Debug("pmcd's namespace changed outside the selection; metadata kept", "pmcd", s.ep.String())
	default:
		s.loads.add(kind)
		s.install(c, md, st, now)
	}
}

// reloaded backs off the next metadata read after a change: pmcd flagging
// a change at every fetch would otherwise make every scrape read the
// metadata again (and log it). The wait grows by the backoff's steps at
// each read until a fetch comes without a flag (quiet). s.mu is held.
func (s *Source) reloaded(now time.Time) {
	s.reloadAt = now.Add(s.opts.Backoff[min(s.reloadStep, len(s.opts.Backoff)-1)])
	s.reloadStep++
	if s.reloadStep == 2 {
		s.log.Warn("pmcd flags a change at every fetch: its metadata is read again at most at each step of the backoff", "pmcd", s.ep.String(), "next", s.opts.Backoff[min(1, len(s.opts.Backoff)-1)], "max", s.opts.Backoff[len(s.opts.Backoff)-1])
	}
}

// quiet records a fetch without change flags: the metadata reads' backoff
// starts again from its first step. s.mu is held.
func (s *Source) quiet() {
	if s.reloadStep >= 2 {
		s.log.Info("pmcd stopped flagging changes at every fetch", "pmcd", s.ep.String())
	}
	s.reloadStep = 0
	s.changeLogged = false
}

// install makes c and md the source's connection and metadata, and st
// (unless nil) when the counters started. s.mu is held.
func (s *Source) install(c *client, md *metadata, st *starts, now time.Time) {
	reload, wasDown := s.c != nil, s.md != nil && s.c == nil
	if reload {
		s.c.close()
	}
	s.c, s.md = c, md
	if st != nil {
		s.started = *st
		s.flag(st.flags)
	}
	s.flag(c.flags)
	c.flags = 0
	s.instAt = now
	s.epoch++
	// the backoff's step is kept until a fetch succeeds (Fetch): a pmcd
	// that answers the metadata and fails every fetch is connected to
	// again once per step of the backoff, not once per scrape
	s.down = nil
	s.req = s.req[:0]
	s.reportMalformed()
	switch {
	case reload && s.reloadStep == 0:
		s.log.Info("pmcd metadata read again after a change", "pmcd", s.ep.String(), "metrics", len(md.metrics), "all", st != nil)
	case reload:
		s.log.Debug("pmcd metadata read again after a change", "pmcd", s.ep.String(), "metrics", len(md.metrics), "all", st != nil)
	case wasDown:
		s.log.Debug("pmcd connected again", "pmcd", s.ep.String(), "metrics", len(md.metrics))
	}
	if reload {
		s.reloaded(now)
	}
}

// reportMalformed logs, once per change of their count, the labels the
// metadata leaves out as malformed. s.mu is held.
func (s *Source) reportMalformed() {
	n := s.md.malformedLabels()
	if n == s.malformedLogged {
		return
	}
	s.malformedLogged = n
	if n == 0 {
		s.log.Info("pmcd's labels are well-formed again", "pmcd", s.ep.String())
		return
	}
	why := s.md.why
	if len(why) > 300 {
		why = why[:300] + "..."
	}
	s.log.Warn("pmcd sent malformed labels: left out, the rest served", "pmcd", s.ep.String(), "labels", n, "first", why)
}

// retry is the backoff timer's end: a new connection is tried.
func (s *Source) retry() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c == nil {
		s.startLoad()
	}
}

// starts are when the counters of pmcd's agents started, where known, and
// pmcd's change flags seen while reading them.
type starts struct {
	boot  time.Time // the host's boot: kernel.all.boottime (else uptime)
	pmcd  time.Time // pmcd's start: proc.psinfo.start_time of pmcd.pid
	flags int32
}

// PMDA domains whose counters' start is known.
const (
	domainPMCD  = 2  // pmcd's own metrics (pmcd.*)
	domainProc  = 3  // proc.*
	domainLinux = 60 // the linux agent: the kernel's counters
)

// pmcdLifetime reports whether the counters of a cluster of pmcd's own
// metrics count from pmcd's start (pmdas/pmcd/src/pmcd.c): pmcd.sighups
// (0), pmcd.pdu_in.* (1) and pmcd.pdu_out.* (2), libpcp's PDU counts
// in pmcd's memory, and pmcd.cputime.total (7), pmcd's process times. The
// others (pmcd.pmie.*: each pmie's own counts) are not pmcd's.
func pmcdLifetime(cluster uint32) bool {
	return cluster == 0 || cluster == 1 || cluster == 2 || cluster == 7
}

// readStarts reads the host's boot time and pmcd's start on c. Metrics
// pmcd does not have or refuses (proc.* over TCP: PM_ERR_PERMISSION) leave
// a start unknown.
func readStarts(c *client, deadline time.Time) (starts, error) {
	var st starts
	ids, err := c.lookupNames(deadline, []string{"kernel.all.boottime", "kernel.all.uptime", "pmcd.pid", "proc.psinfo.start_time"})
	if err != nil {
		return st, ignorePCPError(err)
	}
	want := []uint32{domainLinux, domainLinux, domainPMCD, domainProc}
	var pmids []semantics.PMID
	for i, id := range ids {
		if id == semantics.PMIDNull || id.Domain() != want[i] {
			ids[i] = semantics.PMIDNull
			continue
		}
		if i < 3 {
			pmids = append(pmids, id)
		}
	}
	if len(pmids) == 0 {
		return st, nil
	}
	descs, err := c.lookupDescs(deadline, append(pmids, ids[3]))
	if err != nil {
		return st, err
	}
	types := func(n int) []semantics.Type {
		t := make([]semantics.Type, n)
		for i := range t {
			if descs[i] != nil {
				t[i] = descs[i].Type
			}
		}
		return t
	}
	sets, at, flags, err := c.fetchOnce(deadline, pmids, types(len(pmids)))
	st.flags |= flags
	if err != nil {
		return st, ignorePCPError(err)
	}
	value := func(id semantics.PMID) (semantics.Value, bool) {
		for _, set := range sets {
			if set.PMID == id && id != semantics.PMIDNull && set.Err == nil && len(set.Values) == 1 {
				return set.Values[0].Value, true
			}
		}
		return semantics.Value{}, false
	}
	if v, ok := value(ids[0]); ok {
		st.boot = time.Unix(int64(v.Float64()), 0)
	} else if v, ok := value(ids[1]); ok {
		st.boot = at.Add(-time.Duration(v.Float64() * float64(time.Second))).Truncate(time.Second)
	}
	pid, ok := value(ids[2])
	if !ok || st.boot.IsZero() || ids[3] == semantics.PMIDNull || descs[len(pmids)] == nil {
		return st, nil
	}
	sets, _, flags, err = c.fetchOnce(deadline, ids[3:], []semantics.Type{descs[len(pmids)].Type})
	st.flags |= flags
	if err != nil {
		return st, ignorePCPError(err)
	}
	if len(sets) == 1 && sets[0].Err == nil {
		for _, v := range sets[0].Values {
			if v.Inst == int32(pid.Float64()) {
				st.pmcd = st.boot.Add(time.Duration(v.Value.Float64()) * time.Millisecond)
			}
		}
	}
	return st, nil
}

// Generation returns when pmid's counters started, where known: the host's
// boot for the linux agent (domain 60), whose counters are the kernel's
// since boot; pmcd's start for pmcd's own counters (domain 2, see
// pmcdLifetime; a restarted pmcd is a new generation). Other agents'
// counters start at other times (xfs: since its statistics were last
// cleared; kvm: since the module loaded; proc: each process's start;
// jbd2: each journal's mount; pmproxy: pmproxy's start): unknown.
func (s *Source) Generation(pmid semantics.PMID) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case pmid.Domain() == domainLinux:
		return s.started.boot
	case pmid.Domain() == domainPMCD && pmcdLifetime(pmid.Cluster()):
		return s.started.pmcd
	}
	return time.Time{}
}

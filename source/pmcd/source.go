package pmcd

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// Options configure a Source.
type Options struct {
	// Selection chooses the metrics exported (all by default).
	Selection Selection
	// Timeout bounds connecting and each fetch (default 5 s): a hung PMDA
	// costs a scrape at most this long, then the connection is dropped.
	Timeout time.Duration
	// MetadataTimeout bounds reading the metadata (default 60 s).
	MetadataTimeout time.Duration
	// MaxPDU bounds a reply's size (default DefaultMaxPDU).
	MaxPDU int
	// Backoff is the wait before each reconnection attempt after a
	// failure, the last repeated (default 1, 2, 4, 8, 16, 30 s).
	Backoff []time.Duration
	// Logger receives a line per metadata refresh, and (debug) per change
	// of connection state (default: discarded).
	Logger *slog.Logger
}

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
	c     *conn
	md    *metadata
	epoch uint64
	// stale is set when pmcd flagged a change: metadata is read again at
	// the next Metrics call.
	stale   bool
	down    error // why pmcd cannot be reached; nil when connected
	retryAt time.Time
	fails   int
	boot    time.Time // the host's boot time (kernel.all.uptime), zero if unknown

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
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Source{ep: ep, opts: opts, log: log, failing: map[semantics.PMID]int32{}}
	s.rd.peer = ep.String()
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
func (s *Source) Connect() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c != nil {
		return nil
	}
	return s.connect(time.Now())
}

// connect dials pmcd and reads the metadata; on failure the source is down
// until the next attempt after a backoff.
func (s *Source) connect(now time.Time) error {
	c, err := dial(s.ep, s.opts.Timeout, s.opts.MaxPDU)
	if err == nil {
		var md *metadata
		if md, err = s.load(c); err == nil {
			wasDown := s.md != nil
			s.c, s.md, s.stale = c, md, false
			s.instAt = now
			s.epoch++
			s.fails = 0
			s.down = nil
			s.req = s.req[:0]
			s.readBoot()
			if wasDown {
				s.log.Debug("pmcd connected again", "pmcd", s.ep.String(), "metrics", len(md.metrics))
			}
			return nil
		}
		c.close()
	}
	s.setDown(now, err)
	return err
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
	s.down = err
	s.retryAt = now.Add(s.opts.Backoff[min(s.fails, len(s.opts.Backoff)-1)])
	s.fails++
}

// ensure connects when down and the backoff has passed; false when down.
func (s *Source) ensure(now time.Time) bool {
	if s.c == nil && !now.Before(s.retryAt) {
		s.connect(now)
	}
	return s.c != nil
}

// load reads the metadata of the selected metrics.
func (s *Source) load(c *conn) (*metadata, error) {
	deadline := time.Now().Add(s.opts.MetadataTimeout)
	all, err := c.readNames(deadline)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, n := range all {
		if s.opts.Selection.Selected(n) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	ids, err := c.lookupNames(deadline, names)
	if err != nil {
		return nil, err
	}
	var uniq []semantics.PMID
	seen := map[semantics.PMID]bool{}
	for _, id := range ids {
		if id != semantics.PMIDNull && !seen[id] {
			seen[id] = true
			uniq = append(uniq, id)
		}
	}
	descs, err := c.lookupDescs(deadline, uniq)
	if err != nil {
		return nil, err
	}
	md := &metadata{descs: map[semantics.PMID]*semantics.Desc{}, indoms: map[semantics.InDom]*indom{}}
	for _, d := range descs {
		if d != nil {
			md.descs[d.PMID] = d
		}
	}
	oneline := map[semantics.PMID]string{}
	help := map[semantics.PMID]string{}
	labels := map[request]semantics.LabelSet{}
	if err := c.readDetails(deadline, descs, md, oneline, help, labels); err != nil {
		return nil, err
	}
	md.context = labels[request{kind: pduLabelReq, sub: labelContext, ident: 0xffffffff}]
	merged := map[semantics.PMID]semantics.LabelSet{}
	for i, n := range names {
		d := md.descs[ids[i]]
		if d == nil {
			md.unresolved++
			continue
		}
		ls, ok := merged[d.PMID]
		if !ok {
			lab := func(sub, ident uint32) semantics.LabelSet {
				return labels[request{kind: pduLabelReq, sub: sub, ident: ident}]
			}
			var in semantics.LabelSet
			if d.InDom != semantics.InDomNull {
				in = lab(labelInDom, uint32(d.InDom))
			}
			ls = semantics.MergeLabels(md.context, lab(labelDomain, d.PMID.Domain()), in,
				lab(labelCluster, uint32(semantics.NewPMID(d.PMID.Domain(), d.PMID.Cluster(), 0))), lab(labelItem, uint32(d.PMID)))
			merged[d.PMID] = ls
		}
		md.metrics = append(md.metrics, source.Metric{Name: n, Desc: *d, OneLine: oneline[d.PMID], Help: help[d.PMID], Labels: ls})
	}
	if md.unresolved > 0 {
		s.log.Info("pmcd metrics without a PMID or descriptor skipped", "pmcd", s.ep.String(), "count", md.unresolved)
	}
	return md, nil
}

// readBoot reads the host's boot time from kernel.all.uptime (when pmcd has
// it): the start of the linux agent's counters.
func (s *Source) readBoot() {
	s.boot = time.Time{}
	c := s.c
	deadline := time.Now().Add(s.opts.Timeout)
	ids, err := c.lookupNames(deadline, []string{"kernel.all.uptime"})
	if err != nil || ids[0] == semantics.PMIDNull {
		return
	}
	var res source.Result
	if err := s.fetchLocked([]semantics.PMID{ids[0]}, &res); err != nil || len(res.Sets) != 1 || res.Sets[0].Err != nil || len(res.Sets[0].Values) != 1 {
		return
	}
	up := res.Sets[0].Values[0].Value.Float64()
	s.boot = res.Time.Add(-time.Duration(up * float64(time.Second))).Truncate(time.Second)
	s.req = s.req[:0]
}

// Metrics returns the selected metrics pmcd exports, in name order; the
// last ones known while pmcd cannot be reached. Metadata flagged as changed
// by pmcd is read again first.
func (s *Source) Metrics() []source.Metric {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.ensure(now) && s.stale {
		md, err := s.load(s.c)
		if err != nil {
			s.setDown(now, err)
		} else {
			s.md, s.stale = md, false
			s.instAt = now
			s.epoch++
			s.log.Info("pmcd metadata read again after a change", "pmcd", s.ep.String(), "metrics", len(md.metrics))
		}
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

// Epoch numbers the metadata read: it grows at every (re)read.
func (s *Source) Epoch() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epoch
}

// Generation returns when pmid's counters started, where known: the host's
// boot for the linux agent (domain 60), whose counters are the kernel's.
func (s *Source) Generation(pmid semantics.PMID) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if pmid.Domain() == 60 {
		return s.boot
	}
	return time.Time{}
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
		err := s.fetchLocked(pmids, res)
		if err == nil {
			s.afterFetch(res)
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
// pmcd's request size for pmids and decodes the replies into res.
func (s *Source) fetchLocked(pmids []semantics.PMID, res *source.Result) error {
	c := s.c
	if !slices.Equal(s.req, pmids) {
		s.req = append(s.req[:0], pmids...)
		s.types = s.types[:0]
		s.indoms = s.indoms[:0]
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
	kind, reply := uint32(pduHighresFetch), uint32(pduHighresResult)
	if c.features&featHighres == 0 {
		kind, reply = pduFetch, pduResult
	}
	const chunk = (maxRequest - 28) / 4
	s.rd.reset()
	res.Sets = res.Sets[:0]
	deadline := time.Now().Add(s.opts.Timeout)
	c.c.SetDeadline(deadline)
	for k, lo := 0, 0; lo < len(pmids); k, lo = k+1, lo+chunk {
		hi := min(lo+chunk, len(pmids))
		w := &c.w
		w.b = w.b[:0]
		w.begin(kind)
		w.u32(0) // ctxid
		w.u32(0)
		w.u32(0)
		w.u32(uint32(hi - lo))
		for _, id := range pmids[lo:hi] {
			w.u32(uint32(id))
		}
		w.finish()
		if _, err := c.c.Write(w.b); err != nil {
			return c.ioErr(err)
		}
		if len(s.bufs) <= k {
			s.bufs = append(s.bufs, nil)
		}
		for {
			p, buf, err := readPDU(c.r, s.bufs[k], c.max, c.peer)
			s.bufs[k] = buf[:0]
			if err != nil {
				return c.ioErr(err)
			}
			if p.typ == pduError {
				code, err := errorCode(p, c.peer)
				if err != nil {
					return err
				}
				if code > 0 {
					s.flag(code)
					continue
				}
				// the whole request failed: every metric has the error
				e := s.rd.errOf(code)
				for _, id := range pmids[lo:hi] {
					s.rd.starts = append(s.rd.starts, len(s.rd.vals))
					res.Sets = append(res.Sets, source.ValueSet{PMID: id, Err: e})
				}
				break
			}
			if p.typ != reply {
				return &FormatError{Peer: c.peer, PDU: pduName(p.typ), Offset: 4, Msg: "unexpected reply to " + pduName(kind)}
			}
			res.Sets, res.Time, err = s.rd.decode(p, pmids[lo:hi], s.types[lo:hi], res.Sets)
			if err != nil {
				return err
			}
			break
		}
	}
	s.rd.link(res.Sets)
	return nil
}

// flag records pmcd's state-change flags: metadata is read again before
// the next scrape.
func (s *Source) flag(code int32) {
	if code&(pmcdAgentChange|pmcdLabelChange|pmcdNamesChange|pmcdHostnameChange) != 0 && !s.stale {
		s.stale = true
		s.log.Info("pmcd reports a change; metadata will be read again", "pmcd", s.ep.String(), "flags", fmt.Sprintf("0x%x", code))
	}
}

// afterFetch counts metrics answered with errors and reads again the
// instance domains whose values name instances not known yet.
func (s *Source) afterFetch(res *source.Result) {
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
		for j := range vals {
			if known == nil {
				s.addRefresh(in)
				break
			}
			if _, ok := known.ids[vals[j].Inst]; !ok {
				s.addRefresh(in)
				break
			}
		}
	}
	s.nextStart = append(s.nextStart, int32(len(s.nextInst)))
	if now := time.Now(); now.Sub(s.instAt) > instanceRefresh {
		s.instAt = now
		for _, in := range s.indoms {
			if in != semantics.InDomNull {
				s.addRefresh(in)
			}
		}
	}
	s.prevInst, s.nextInst = s.nextInst, s.prevInst
	s.prevStart, s.nextStart = s.nextStart, s.prevStart
	if len(s.refresh) > 0 {
		if err := s.readInstances(s.refresh); err != nil {
			s.setDown(time.Now(), err)
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

// readInstances reads instance domains again (with their instance labels).
func (s *Source) readInstances(indoms []semantics.InDom) error {
	c := s.c
	c.w.b = c.w.b[:0]
	withLabels := c.features&featLabels != 0
	per := 1
	if withLabels {
		per = 2
	}
	for _, in := range indoms {
		c.w.begin(pduInstanceReq)
		c.w.u32(uint32(in))
		c.w.u32(0)
		c.w.u32(0)
		c.w.u32(0xffffffff)
		c.w.u32(0)
		c.w.finish()
		if withLabels {
			c.w.begin(pduLabelReq)
			c.w.u32(uint32(in))
			c.w.u32(labelInstances)
			c.w.finish()
		}
	}
	var insts []source.Instance
	return c.exchange(time.Now().Add(s.opts.Timeout), per*len(indoms), func(i int, p pdu) error {
		in := indoms[i/per]
		if p.typ == pduError {
			if err := ignorePCPError(c.expect(p, pduError)); err != nil {
				return err
			}
			if i%per == 0 {
				insts = nil
				if per == 1 {
					s.md.setInstances(in, nil, nil)
				}
			} else {
				s.md.setInstances(in, insts, nil)
			}
			return nil
		}
		if i%per == 0 {
			if err := c.expect(p, pduInstance); err != nil {
				return err
			}
			var err error
			if insts, err = decodeInstances(p, c.peer); err != nil {
				return err
			}
			if per == 1 {
				s.md.setInstances(in, insts, nil)
			}
			return nil
		}
		if err := c.expect(p, pduLabel); err != nil {
			return err
		}
		sets, err := decodeLabels(p, c.peer)
		if err != nil {
			return err
		}
		m := make(map[int32]semantics.LabelSet, len(sets))
		for _, ls := range sets {
			m[ls.inst] = ls.labels
		}
		s.md.setInstances(in, insts, m)
		return nil
	})
}

// Close closes the connection.
func (s *Source) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c != nil {
		s.c.close()
		s.c = nil
	}
	s.down = errors.New("closed")
	return nil
}

var (
	_ source.Source      = (*Source)(nil)
	_ source.Monitored   = (*Source)(nil)
	_ source.Generations = (*Source)(nil)
	_ source.Epoched     = (*Source)(nil)
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

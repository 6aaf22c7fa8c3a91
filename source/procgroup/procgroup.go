// Package procgroup adds per-group process metrics, in the spirit of
// process-exporter, to a source that has the proc agent's metrics: the
// processes are grouped by command name (proc.psinfo.cmd; a regular
// expression can choose and rename the groups), and each group is an
// instance of procgroup.count, procgroup.cpu.user and .sys,
// procgroup.memory.rss, procgroup.io.read_bytes and .write_bytes,
// procgroup.fds and procgroup.threads, summed over its processes.
//
// A group's series do not change as its processes come and go: a group,
// once seen, stays (with count 0 when it has no process left), and its
// counters stay monotonic when a process exits, as process-exporter keeps
// them: the last counts read of every process that has gone are added to
// the group for good. A PID reused by another command is a new process.
// Counts a process gathered between the last read and its exit are not
// known to anyone: the group's counter then lags by them.
package procgroup

import (
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// Domain is the PMID and instance domain of the group metrics (an
// end-user PMDA domain of stdpmid, 385-510, taken from the top).
const Domain = 510

// InDom is the instance domain of the groups.
var InDom = semantics.NewInDom(Domain, 0)

// cmdName is the metric whose value names a process's group.
const cmdName = "proc.psinfo.cmd"

// groupMetric is one metric of a group: the proc metric summed (none for
// the count).
type groupMetric struct {
	name, from, oneLine string
}

var groupMetrics = []groupMetric{
	{"procgroup.count", "", "Number of processes in the group"},
	{"procgroup.cpu.user", "proc.psinfo.utime", "User CPU time of the group's processes, exited ones included"},
	{"procgroup.cpu.sys", "proc.psinfo.stime", "System CPU time of the group's processes, exited ones included"},
	{"procgroup.memory.rss", "proc.memory.rss", "Resident memory of the group's processes"},
	{"procgroup.io.read_bytes", "proc.io.read_bytes", "Bytes read from storage by the group's processes, exited ones included"},
	{"procgroup.io.write_bytes", "proc.io.write_bytes", "Bytes written to storage by the group's processes, exited ones included"},
	{"procgroup.fds", "proc.fd.count", "Open file descriptors of the group's processes"},
	{"procgroup.threads", "proc.psinfo.threads", "Threads of the group's processes"},
}

// Options are the grouping's settings.
type Options struct {
	// Match, when set, chooses the processes grouped by their command
	// name: those it matches, grouped by its first submatch (else the
	// whole match). Others are left out. nil groups every process by its
	// command name.
	Match *regexp.Regexp
}

// Source is a source with the group metrics added (when it has
// proc.psinfo.cmd).
type Source struct {
	src  source.Source
	opts Options

	mu      sync.Mutex
	metrics []source.Metric
	sig     int              // len of the inner metrics the list was made from
	from    []int            // index in the inner metrics of each group metric's proc metric (-1: none)
	cmd     int              // index of proc.psinfo.cmd (-1: none)
	descs   []semantics.Desc // of cmd and the from metrics, when the list was made
	own     map[semantics.PMID]int
	groups  []*group // by instance id
	byName  map[string]*group
	members map[int32]*member
	seen    map[int32]bool
	inner   source.Result
	pmids   []semantics.PMID
}

type group struct {
	id     int32
	name   string
	exited []uint64 // the last counts of its processes that are gone
	sum    []uint64 // this read's sums (exited included for counters)
}

type member struct {
	g    *group
	last []uint64
}

// New wraps src.
func New(src source.Source, opts Options) *Source {
	return &Source{src: src, opts: opts, byName: map[string]*group{}, members: map[int32]*member{}, seen: map[int32]bool{}}
}

// Unwrap returns the wrapped source.
func (s *Source) Unwrap() source.Source { return s.src }

// Close closes the wrapped source.
func (s *Source) Close() error { return s.src.Close() }

// Metrics returns the wrapped source's metrics and the group metrics.
func (s *Source) Metrics() []source.Metric {
	ms := s.src.Metrics()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.update(ms)
	return s.metrics
}

// update builds the metric list when the inner one changed.
func (s *Source) update(ms []source.Metric) {
	if s.metrics != nil && len(ms) == s.sig && s.same(ms) {
		return
	}
	s.sig = len(ms)
	s.cmd = -1
	s.from = make([]int, len(groupMetrics))
	byName := map[string]int{}
	for i := range ms {
		byName[ms[i].Name] = i
	}
	s.metrics = append(s.metrics[:0:0], ms...)
	s.own = map[semantics.PMID]int{}
	c, ok := byName[cmdName]
	if !ok || ms[c].Desc.InDom == semantics.InDomNull {
		return
	}
	s.cmd = c
	s.descs = append(s.descs[:0], ms[c].Desc)
	for i, gm := range groupMetrics {
		d := semantics.Desc{PMID: semantics.NewPMID(Domain, 0, uint32(i+1)), Type: semantics.TypeU64, InDom: InDom, Sem: semantics.SemInstant, Units: semantics.Units{DimCount: 1}}
		s.from[i] = -1
		if gm.from != "" {
			j, ok := byName[gm.from]
			if !ok || ms[j].Desc.InDom != ms[c].Desc.InDom {
				continue // the proc agent lacks it
			}
			s.from[i] = j
			s.descs = append(s.descs, ms[j].Desc)
			d.Sem, d.Units = ms[j].Desc.Sem, ms[j].Desc.Units
		}
		s.own[d.PMID] = i
		s.metrics = append(s.metrics, source.Metric{Name: gm.name, Desc: d, OneLine: gm.oneLine,
			Help: gm.oneLine + ", summed from " + cmdName + "'s processes' " + orCount(gm.from) + " (pcp-exporter process groups)."})
	}
}

// same reports whether the proc metrics the groups read are where and as
// they were when the list was made.
func (s *Source) same(ms []source.Metric) bool {
	k := 0
	check := func(i int) bool {
		ok := i < len(ms) && k < len(s.descs) && ms[i].Desc == s.descs[k]
		k++
		return ok
	}
	if s.cmd >= 0 && !check(s.cmd) {
		return false
	}
	for _, j := range s.from {
		if j >= 0 && !check(j) {
			return false
		}
	}
	return true
}

func orCount(from string) string {
	if from == "" {
		return "count"
	}
	return from
}

// Instances returns the groups for InDom, else asks the wrapped source.
func (s *Source) Instances(indom semantics.InDom) []source.Instance {
	if indom != InDom {
		return s.src.Instances(indom)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]source.Instance, len(s.groups))
	for i, g := range s.groups {
		out[i] = source.Instance{ID: g.id, Name: g.name}
	}
	return out
}

// Fetch fetches the wrapped source's metrics, and for group metrics the
// proc metrics they sum.
func (s *Source) Fetch(t time.Time, pmids []semantics.PMID, res *source.Result) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.metrics == nil {
		s.update(s.src.Metrics())
	}
	own := false
	for _, p := range pmids {
		if _, ok := s.own[p]; ok {
			own = true
			break
		}
	}
	if !own {
		return s.src.Fetch(t, pmids, res)
	}
	ms := s.metrics
	s.pmids = s.pmids[:0]
	for _, p := range pmids {
		if _, ok := s.own[p]; !ok {
			s.pmids = append(s.pmids, p)
		}
	}
	base := len(s.pmids)
	s.pmids = append(s.pmids, ms[s.cmd].Desc.PMID)
	for _, j := range s.from {
		if j >= 0 {
			s.pmids = append(s.pmids, ms[j].Desc.PMID)
		}
	}
	if err := s.src.Fetch(t, s.pmids, &s.inner); err != nil {
		return err
	}
	if len(s.inner.Sets) != len(s.pmids) {
		return fmt.Errorf("procgroup: %d value sets for %d metrics", len(s.inner.Sets), len(s.pmids))
	}
	s.group(s.inner.Sets[base:])
	res.Time = s.inner.Time
	res.Sets = res.Sets[:0]
	k := 0
	for _, p := range pmids {
		if i, ok := s.own[p]; ok {
			vs := source.ValueSet{PMID: p}
			for _, g := range s.groups {
				vs.Values = append(vs.Values, source.InstValue{Inst: g.id, Value: semantics.Uint64Value(g.sum[i])})
			}
			res.Sets = append(res.Sets, vs)
			continue
		}
		res.Sets = append(res.Sets, s.inner.Sets[k])
		k++
	}
	return nil
}

// group sums a read's proc values (sets: proc.psinfo.cmd, then the proc
// metrics of s.from in order) into the groups.
func (s *Source) group(sets []source.ValueSet) {
	n := len(groupMetrics)
	cmds := sets[0]
	// the value of each summed metric by PID
	type col struct {
		i    int
		byID map[int32]uint64
	}
	var cols []col
	k := 1
	for i, j := range s.from {
		if j < 0 {
			continue
		}
		c := col{i: i, byID: make(map[int32]uint64, len(sets[k].Values))}
		if sets[k].Err == nil {
			for _, v := range sets[k].Values {
				c.byID[v.Inst] = v.Value.Uint64()
			}
		}
		cols = append(cols, c)
		k++
	}
	for _, g := range s.groups {
		for i := range g.sum {
			g.sum[i] = 0
		}
	}
	clear(s.seen)
	if cmds.Err == nil {
		for _, v := range cmds.Values {
			name := v.Value.Str()
			if s.opts.Match != nil {
				m := s.opts.Match.FindStringSubmatch(name)
				if m == nil {
					continue
				}
				name = m[0]
				if len(m) > 1 {
					name = m[1]
				}
			}
			g := s.byName[name]
			if g == nil {
				g = &group{id: int32(len(s.groups)), name: name, exited: make([]uint64, n), sum: make([]uint64, n)}
				s.groups = append(s.groups, g)
				s.byName[name] = g
			}
			pid := v.Inst
			m := s.members[pid]
			if m != nil && m.g != g { // the PID reused by another command
				s.exit(m)
				m = nil
			}
			if m == nil {
				m = &member{g: g, last: make([]uint64, n)}
				s.members[pid] = m
			}
			s.seen[pid] = true
			g.sum[0]++
			for _, c := range cols {
				if x, ok := c.byID[pid]; ok {
					m.last[c.i] = x
				}
				g.sum[c.i] += m.last[c.i]
			}
		}
	}
	for pid, m := range s.members {
		if !s.seen[pid] {
			s.exit(m)
			delete(s.members, pid)
		}
	}
	for _, g := range s.groups {
		for i, j := range s.from {
			if j >= 0 && s.metrics[j].Desc.Sem == semantics.SemCounter {
				g.sum[i] += g.exited[i]
			}
		}
	}
}

// exit keeps the last counts of a process that has gone in its group.
func (s *Source) exit(m *member) {
	for i, j := range s.from {
		if j >= 0 && s.metrics[j].Desc.Sem == semantics.SemCounter {
			m.g.exited[i] += m.last[i]
		}
	}
}

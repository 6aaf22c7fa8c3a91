package source

import (
	"strconv"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
)

// InstanceLister is what lists instances: every Source, and an archive.
type InstanceLister interface {
	Instances(indom semantics.InDom) []Instance
}

// InDomHistory is implemented by sources whose instances change their
// names and instance labels over time (archives: a PMDA renumbering disks,
// a process id reused by another process). PCP identifies an instance by
// its id; its name is the one in force at the sample's time.
type InDomHistory interface {
	// InstancesInForce returns the instances Instances lists, each with
	// the name and instance labels in force at t (libpcp's pmGetInDom
	// after pmSetMode to t), and the earliest time after t at which that
	// answer may change (zero: not before the metadata grows).
	InstancesInForce(indom semantics.InDom, t time.Time) (insts []Instance, until time.Time)
}

// InstancesInForce returns src's instances of indom in force at t, and
// until when that holds, for any source (through wrappers): one without
// history answers Instances, valid as long as the metric set (see Epoched).
func InstancesInForce(src InstanceLister, indom semantics.InDom, t time.Time) ([]Instance, time.Time) {
	if h, ok := capability[InDomHistory](src); ok {
		return h.InstancesInForce(indom, t)
	}
	return src.Instances(indom), time.Time{}
}

// HasInDomHistory reports whether src (through wrappers) names its
// instances as at a time (InDomHistory): then InstanceNames' answers hold
// for the spans they say, where a source without history must be asked
// again at every read (a live source's instances come and go).
func HasInDomHistory(src InstanceLister) bool {
	_, ok := capability[InDomHistory](src)
	return ok
}

// InstanceNames finds instances by id at the times of the values a
// consumer reads, asking the source again only when the time passes out of
// the span its last answer holds for.
// The zero value is not usable; make one with NewInstanceNames.
type InstanceNames struct {
	src  InstanceLister
	doms map[semantics.InDom]*instSpan
	gen  uint64
}

type instSpan struct {
	from, until time.Time // the answer holds from from until until (zero: on)
	byID        map[int32]*Instance
	gen         uint64
}

// NewInstanceNames returns an empty cache over src.
func NewInstanceNames(src InstanceLister) *InstanceNames {
	return &InstanceNames{src: src, doms: map[semantics.InDom]*instSpan{}}
}

// Gen returns a number that changes whenever the instances of indom at t
// differ from those of the previous call for the domain: a consumer that
// remembers what it made of an instance keeps it while Gen stays the same.
func (c *InstanceNames) Gen(indom semantics.InDom, t time.Time) uint64 {
	return c.span(indom, t).gen
}

// Lookup returns the instance id of indom at t, and whether the source
// knows it (an unknown one is named by its number).
func (c *InstanceNames) Lookup(indom semantics.InDom, id int32, t time.Time) (*Instance, bool) {
	s := c.span(indom, t)
	if in := s.byID[id]; in != nil {
		return in, true
	}
	return &Instance{ID: id, Name: strconv.Itoa(int(id))}, false
}

func (c *InstanceNames) span(indom semantics.InDom, t time.Time) *instSpan {
	s := c.doms[indom]
	if s != nil && !t.Before(s.from) && (s.until.IsZero() || t.Before(s.until)) {
		return s
	}
	ins, until := InstancesInForce(c.src, indom, t)
	c.gen++
	s = &instSpan{from: t, until: until, byID: make(map[int32]*Instance, len(ins)), gen: c.gen}
	for i := range ins {
		s.byID[ins[i].ID] = &ins[i]
	}
	c.doms[indom] = s
	return s
}

package pmcd

import (
	"hash/maphash"
	"slices"
	"sync"
	"weak"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// Metadata shared between sources. The pmcds of a fleet running one PCP
// version with the same agents answer the same names, descriptors, help
// texts and labels: what a metadata read resolves (the selected names, their
// PMIDs, the metrics with their help and merged labels, the descriptors) is
// kept once, in a process-wide pool keyed by a hash of it, and every source
// that read the same holds the one copy. What differs per pmcd (instances,
// values, connections) stays the source's own. An entry lives as long as a
// source holds it (a weak pointer in the pool), so a pool of probe targets
// evicting its last target of a kind frees that kind's metadata too.
//
// A pmcd's context labels (hostname, machineid) are part of every metric's
// merged labels (source.Metric), so pmcds share when these are equal too
// (docs/performance.md, "Fleet").

// skeleton is the shared part of a metadata read; never modified once
// interned.
type skeleton struct {
	names   []string
	ids     []semantics.PMID
	metrics []source.Metric
	descs   map[semantics.PMID]*semantics.Desc
}

var skeletons = struct {
	sync.Mutex
	seed maphash.Seed
	m    map[uint64][]weak.Pointer[skeleton]
}{seed: maphash.MakeSeed(), m: map[uint64][]weak.Pointer[skeleton]{}}

// share replaces md's names, PMIDs, metrics and descriptors with those of
// an equal skeleton already read by another source, or makes md's the one
// others will share.
func share(md *metadata) {
	sk := &skeleton{names: md.names, ids: md.ids, metrics: md.metrics, descs: md.descs}
	h := sk.hash()
	skeletons.Lock()
	defer skeletons.Unlock()
	live := skeletons.m[h][:0]
	var found *skeleton
	for _, w := range skeletons.m[h] {
		s := w.Value()
		if s == nil {
			continue // its last holder is gone
		}
		live = append(live, w)
		if found == nil && s.equal(sk) {
			found = s
		}
	}
	if found == nil {
		found = sk
		live = append(live, weak.Make(sk))
		skeletons.m[h] = live
		sweepSkeletons()
	} else {
		skeletons.m[h] = live
	}
	md.shared = found
	md.names, md.ids, md.metrics, md.descs = found.names, found.ids, found.metrics, found.descs
}

// sweepSkeletons drops the pool's entries whose skeletons are gone
// (skeletons held): done when an entry is added, so the pool holds no more
// entries than skeletons alive and added since the last one went.
func sweepSkeletons() {
	for h, ws := range skeletons.m {
		live := ws[:0]
		for _, w := range ws {
			if w.Value() != nil {
				live = append(live, w)
			}
		}
		if len(live) == 0 {
			delete(skeletons.m, h)
		} else {
			skeletons.m[h] = live
		}
	}
}

func (sk *skeleton) hash() uint64 {
	var h maphash.Hash
	h.SetSeed(skeletons.seed)
	var b [4]byte
	u32 := func(v uint32) {
		b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
		h.Write(b[:])
	}
	str := func(s string) {
		u32(uint32(len(s)))
		h.WriteString(s)
	}
	for i, n := range sk.names {
		str(n)
		u32(uint32(sk.ids[i]))
	}
	for i := range sk.metrics {
		m := &sk.metrics[i]
		str(m.Name)
		d := m.Desc
		u32(uint32(d.PMID))
		u32(uint32(d.Type))
		u32(uint32(d.InDom))
		u32(uint32(d.Sem))
		u32(d.Units.Word())
		str(m.OneLine)
		str(m.Help)
		u32(uint32(len(m.Labels)))
		for _, l := range m.Labels {
			str(l.Name)
			str(l.Value)
			u32(uint32(l.Flags))
		}
	}
	return h.Sum64()
}

func (sk *skeleton) equal(o *skeleton) bool {
	if !slices.Equal(sk.names, o.names) || !slices.Equal(sk.ids, o.ids) || len(sk.metrics) != len(o.metrics) || len(sk.descs) != len(o.descs) {
		return false
	}
	for i := range sk.metrics {
		a, b := &sk.metrics[i], &o.metrics[i]
		if a.Name != b.Name || a.Desc != b.Desc || a.OneLine != b.OneLine || a.Help != b.Help || !slices.Equal(a.Labels, b.Labels) {
			return false
		}
	}
	for id, d := range sk.descs {
		if e := o.descs[id]; e == nil || *e != *d {
			return false
		}
	}
	return true
}

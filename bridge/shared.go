package bridge

import (
	"sync"
	"unsafe"
	"weak"

	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// Mappings shared between collectors. A collector of one source (a /probe
// target) maps its source's metrics alone, so its families depend only on
// the mapper, the metrics and the target labels: collectors whose sources
// hold the very same metrics (pmcds of a fleet share their metadata,
// source/pmcd's shared.go) with the same target labels share one mapping
// instead of each keeping its own families. An entry lives as long as a
// collector holds it (a weak pointer in the pool).

// mapped is one mapping of a metric set; never modified once made.
type mapped struct {
	mapper   *mapping.Mapper
	ms       []source.Metric // held: its address is the key
	families []mapping.Family
	skipped  []mapping.Skipped
	pmids    []semantics.PMID
}

// mappedKey identifies a mapping by the addresses of its mapper and
// metrics (held by the entry, so not reused while it lives).
type mappedKey struct {
	mapper, ms uintptr
	n          int
}

var mappings = struct {
	sync.Mutex
	m map[mappedKey]weak.Pointer[mapped]
}{m: map[mappedKey]weak.Pointer[mapped]{}}

// mapShared maps ms alone (a fresh namespace), or returns the mapping
// another collector made of the same.
func mapShared(m *mapping.Mapper, ms []source.Metric) *mapped {
	k := mappedKey{mapper: uintptr(unsafe.Pointer(m)), ms: uintptr(unsafe.Pointer(unsafe.SliceData(ms))), n: len(ms)}
	mappings.Lock()
	if e := mappings.m[k].Value(); e != nil && e.mapper == m && unsafe.SliceData(e.ms) == unsafe.SliceData(ms) {
		mappings.Unlock()
		return e
	}
	mappings.Unlock()
	e := &mapped{mapper: m, ms: ms}
	e.families, e.skipped = m.MapSource(ms, nil, mapping.NewNamespace())
	for _, f := range e.families {
		e.pmids = append(e.pmids, f.Desc.PMID)
	}
	mappings.Lock()
	defer mappings.Unlock()
	if o := mappings.m[k].Value(); o != nil && o.mapper == m && unsafe.SliceData(o.ms) == unsafe.SliceData(ms) {
		return o // mapped meanwhile by another collector
	}
	for k, w := range mappings.m {
		if w.Value() == nil {
			delete(mappings.m, k)
		}
	}
	mappings.m[k] = weak.Make(e)
	return e
}

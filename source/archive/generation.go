package archive

import (
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

// Generation returns when the counters of the recording run in force at
// the time of the last fetch started (source.Generations): the start of the
// archive holding it or its last <mark> at or before it (see runStarts);
// zero before any fetch.
func (r *Replay) Generation(semantics.PMID) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.fetched {
		return time.Time{}
	}
	if r.runs == nil {
		r.runs = pcplog.NewRunStarts(r.archives)
	}
	return r.runs.At(r.served)
}

// Generation returns the start of the followed run (source.Generations):
// the label start of the first archive followed. It stays when pmlogger
// starts a new archive, since Follow bridges the rotation with the latest
// values and the series go on (pmlogger_daily's rotation does not reset
// a counter). After a restart of pmlogger, or of pmcd and its agents, the
// archive alone cannot tell whether the counters restarted (a kernel
// counter goes on; an agent's own may start over): a counter that did
// restart shows as a value that goes down, which starts its series anew
// (bridge.CounterStart); one that restarted and passed its old value
// before the first record is not seen, as in Prometheus. Zero until an
// archive is followed.
func (f *Follow) Generation(semantics.PMID) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runStart
}

var (
	_ source.Generations = (*Replay)(nil)
	_ source.Generations = (*Follow)(nil)
)

// RunStart returns when the recording run in force at t began in a
// timeline of archives (the start of the archive holding t, or its last
// <mark> at or before t: see Replay.Generation), reading the archives'

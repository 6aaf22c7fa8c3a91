package probe

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pcp-exporter/pcp-exporter/internal/selfmetric"
)

// The limits a probe can be refused by (pcp_exporter_probe_refused_total).
const (
	limitConcurrent = "max_concurrent"
	limitTargets    = "max_targets"
)

// refusedLogEvery is the least time between two log lines of refusals.
const refusedLogEvery = time.Minute

// counts are the probes by outcome, for the self-metrics.
type counts struct {
	answered, failed              atomic.Uint64
	refusedConcurrent, refusedMax atomic.Uint64

	mu        sync.Mutex
	logged    time.Time // last log line of refusals
	unlogged  uint64    // refusals since
	lastLimit string
}

func (c *counts) probe(ok bool) {
	if ok {
		c.answered.Add(1)
	} else {
		c.failed.Add(1)
	}
}

// refuse answers 503 for a probe a limit refused, counts it, and logs the
// refusals at most once a minute (with their count since the last line).
func (h *Handler) refuse(w http.ResponseWriter, limit, msg string) {
	c := &h.count
	if limit == limitConcurrent {
		c.refusedConcurrent.Add(1)
	} else {
		c.refusedMax.Add(1)
	}
	c.mu.Lock()
	c.unlogged++
	now := time.Now()
	if now.Sub(c.logged) >= refusedLogEvery || limit != c.lastLimit {
		h.log.Warn("probes refused by a limit", "limit", "probe."+limit, "refused", c.unlogged, "last", msg)
		c.logged, c.unlogged, c.lastLimit = now, 0, limit
	}
	c.mu.Unlock()
	http.Error(w, msg, http.StatusServiceUnavailable)
}

// Describe is prometheus.Collector's: the self-metrics of /probe.
func (h *Handler) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range []*selfmetric.Metric{&selfmetric.ProbeTargets, &selfmetric.ProbeTargetsOpened, &selfmetric.Probes, &selfmetric.ProbeRefused} {
		ch <- m.Desc()
	}
}

// Collect is prometheus.Collector's.
func (h *Handler) Collect(ch chan<- prometheus.Metric) {
	h.mu.Lock()
	targets, opened := len(h.pool), h.conns
	h.mu.Unlock()
	c := &h.count
	refusedC, refusedT := c.refusedConcurrent.Load(), c.refusedMax.Load()
	ch <- prometheus.MustNewConstMetric(selfmetric.ProbeTargets.Desc(), prometheus.GaugeValue, float64(targets))
	ch <- prometheus.MustNewConstMetric(selfmetric.ProbeTargetsOpened.Desc(), prometheus.CounterValue, float64(opened))
	ch <- prometheus.MustNewConstMetric(selfmetric.Probes.Desc(), prometheus.CounterValue, float64(c.answered.Load()), "answered")
	ch <- prometheus.MustNewConstMetric(selfmetric.Probes.Desc(), prometheus.CounterValue, float64(c.failed.Load()), "failed")
	ch <- prometheus.MustNewConstMetric(selfmetric.Probes.Desc(), prometheus.CounterValue, float64(refusedC+refusedT), "refused")
	ch <- prometheus.MustNewConstMetric(selfmetric.ProbeRefused.Desc(), prometheus.CounterValue, float64(refusedC), limitConcurrent)
	ch <- prometheus.MustNewConstMetric(selfmetric.ProbeRefused.Desc(), prometheus.CounterValue, float64(refusedT), limitTargets)
}

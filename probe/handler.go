// Package probe serves /probe?target=&module=&auth=, the multi-target
// pattern of blackbox and snmp exporters, over pmcds: a pool keyed by
// (target, auth, module) keeps each target's connection and metadata
// across scrapes (metadata read once, refreshed when pmcd flags a change,
// the target closed when idle), within limits on the pool's size and on
// concurrent probes, for targets of an allow list only (config.go).
package probe

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/pcp-exporter/pcp-exporter/bridge"
	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/pmcd"
)

// Handler serves /probe.
type Handler struct {
	mapper *mapping.Mapper
	log    *slog.Logger
	// mappers are the modules' namings' mappers (mapperOf), made from
	// mapper when first used (under mu)
	mappers map[mapping.Naming]*mapping.Mapper

	mu    sync.Mutex
	cfg   *Config
	pool  map[key]*entry
	sem   chan struct{}
	loads chan struct{} // metadata reads under way (pmcd.Options.Loads)
	stop  chan struct{}
	conns uint64 // targets opened (under mu)
	count counts
}

type key struct{ target, auth, module string }

// entry is a pooled target: its source and collector, used by one probe
// at a time.
type entry struct {
	mu   sync.Mutex
	src  *pmcd.Source
	col  *bridge.Collector
	used time.Time // last probe (under Handler.mu)
	busy int       // probes under way or waiting (under Handler.mu)
}

// New returns a Handler over cfg; mapper names the metrics. Close stops it.
func New(cfg *Config, mapper *mapping.Mapper, log *slog.Logger) *Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Handler{mapper: mapper, log: log, cfg: cfg, pool: map[key]*entry{}, stop: make(chan struct{})}
	h.limits(cfg)
	go h.janitor()
	return h
}

// Reload replaces the configuration: targets whose auth or module changed
// are closed (all of them, as their settings may have).
func (h *Handler) Reload(cfg *Config) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cfg = cfg
	h.limits(cfg)
	for k, e := range h.pool {
		if e.busy == 0 {
			e.src.Close()
			delete(h.pool, k)
		}
	}
}

// limits makes the semaphores of cfg's limits. h.mu is held (or h new).
func (h *Handler) limits(cfg *Config) {
	h.sem = make(chan struct{}, cfg.Probe.MaxConcurrent)
	h.loads = make(chan struct{}, cfg.Probe.MaxMetadataReads)
}

// Close closes every pooled target.
func (h *Handler) Close() {
	close(h.stop)
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, e := range h.pool {
		e.src.Close()
		delete(h.pool, k)
	}
}

// Targets is the number of pooled targets.
func (h *Handler) Targets() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.pool)
}

func (h *Handler) janitor() {
	for {
		h.mu.Lock()
		idle := h.cfg.Probe.IdleTimeout
		h.mu.Unlock()
		select {
		case <-h.stop:
			return
		case <-time.After(idle / 4):
		}
		h.mu.Lock()
		for k, e := range h.pool {
			if e.busy == 0 && time.Since(e.used) > idle {
				e.src.Close()
				delete(h.pool, k)
			}
		}
		h.mu.Unlock()
	}
}

// timeoutOffset is left of Prometheus' scrape timeout for the answer to
// travel (blackbox_exporter's default --timeout-offset).
const timeoutOffset = 500 * time.Millisecond

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	q := r.URL.Query()
	if len(q["target"]) != 1 || q.Get("target") == "" {
		http.Error(w, "give exactly one target parameter (HOST[:PORT] or unix:PATH)", http.StatusBadRequest)
		return
	}
	target, auth, module := q.Get("target"), q.Get("auth"), q.Get("module")
	h.mu.Lock()
	cfg, sem := h.cfg, h.sem
	h.mu.Unlock()
	if !cfg.Allowed(target) {
		http.Error(w, fmt.Sprintf("target %q is not in probe.allow of %s", target, cfg.file), http.StatusForbidden)
		return
	}
	if _, err := pmcd.ParseSpec(target); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	sec, err := cfg.Security(auth)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	mod, err := cfg.Module(module)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	timeout := mod.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	if v := r.Header.Get("X-Prometheus-Scrape-Timeout-Seconds"); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil && s > 0 {
			if d := time.Duration(s*float64(time.Second)) - timeoutOffset; d > 0 && d < timeout {
				timeout = d
			}
		}
	}
	deadline := start.Add(timeout)
	ctx, cancel := context.WithDeadline(r.Context(), deadline)
	defer cancel()
	e, err := h.get(key{target, auth, module}, sec, mod, timeout)
	if _, full := err.(poolFull); full {
		h.refuse(w, limitTargets, err.Error())
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	defer h.release(e)
	// a target's first probe waits for its metadata, read in the
	// background (probe.max_metadata_reads at once), without holding one
	// of the max_concurrent places: the probes of targets already read
	// go on meanwhile
	cerr := e.src.ConnectBy(deadline)
	if cerr == nil {
		select {
		case sem <- struct{}{}:
			defer func() { <-sem }()
		case <-ctx.Done():
			h.refuse(w, limitConcurrent, fmt.Sprintf("%d probes under way (probe.max_concurrent): none ended within %v", cap(sem), timeout))
			return
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var buf bytes.Buffer
	ok := 1.0
	if cerr != nil {
		ok = 0
		h.log.Debug("probe failed", "target", target, "auth", auth, "err", cerr)
	} else if err := e.col.Write(&buf, bridge.Format{}); err != nil {
		ok = 0
		buf.Reset()
	}
	// a target is probed every scrape interval: its values and reply
	// buffers are not kept in between (most of a pooled target's memory)
	e.col.Release()
	if ok == 1 && e.src.Status(time.Now()).Reason != source.ReasonUp {
		ok = 0
	}
	h.count.probe(ok == 1)
	fmt.Fprintf(&buf, "# HELP pcp_probe_success 1 when pmcd answered the probe.\n# TYPE pcp_probe_success gauge\npcp_probe_success %g\n", ok)
	fmt.Fprintf(&buf, "# HELP pcp_probe_duration_seconds Time the probe took.\n# TYPE pcp_probe_duration_seconds gauge\npcp_probe_duration_seconds %g\n", time.Since(start).Seconds())
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Write(buf.Bytes())
}

// get finds or opens the pooled target of k, closing the least recently
// used idle one when the pool is full.
func (h *Handler) get(k key, sec *pmcd.Security, mod Module, timeout time.Duration) (*entry, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e, ok := h.pool[k]; ok {
		e.busy++
		e.used = time.Now()
		return e, nil
	}
	if len(h.pool) >= h.cfg.Probe.MaxTargets {
		var oldest key
		var old *entry
		for k, e := range h.pool {
			if e.busy == 0 && (old == nil || e.used.Before(old.used)) {
				oldest, old = k, e
			}
		}
		if old == nil {
			return nil, poolFull(len(h.pool))
		}
		old.src.Close()
		delete(h.pool, oldest)
	}
	mapper, err := h.mapperOf(mod)
	if err != nil {
		return nil, err
	}
	sel, _ := pmcd.ParseSelection(mod.Metrics)
	if len(sel.Include) == 0 {
		// what the mapping leaves out is not read either (proc's
		// metadata is most of a pmcd's), as serve's --pmcd does
		sel.Exclude = append(sel.Exclude, mapper.UnreadSubtrees()...)
	}
	// pmcds differing only in their context labels (hostname, machineid)
	// share their metadata when these go only into target_info
	src, err := pmcd.New(k.target, pmcd.Options{Selection: sel, Timeout: timeout, Security: sec, Logger: h.log, ContextApart: mapper.ContextOnTargetOnly(), Loads: h.loads})
	if err != nil {
		return nil, err
	}
	e := &entry{src: src, used: time.Now(), busy: 1}
	e.col = bridge.New(mapper, h.log, bridge.Source{Name: "pmcd " + k.target, Src: src})
	h.pool[k] = e
	h.conns++
	return e, nil
}

// mapperOf is the mapper of mod's naming (serve's when it has none);
// under h.mu.
func (h *Handler) mapperOf(mod Module) (*mapping.Mapper, error) {
	if mod.Naming == "" {
		return h.mapper, nil
	}
	n, err := mapping.ParseNaming(mod.Naming)
	if err != nil {
		return nil, err
	}
	if m, ok := h.mappers[n]; ok {
		return m, nil
	}
	m, err := h.mapper.WithNaming(n)
	if err != nil {
		return nil, err
	}
	if h.mappers == nil {
		h.mappers = map[mapping.Naming]*mapping.Mapper{}
	}
	h.mappers[n] = m
	return m, nil
}

// poolFull is get's error when probe.max_targets targets are pooled and
// all are being probed.
type poolFull int

func (n poolFull) Error() string {
	return fmt.Sprintf("%d targets pooled and all busy (probe.max_targets)", int(n))
}

func (h *Handler) release(e *entry) {
	h.mu.Lock()
	e.busy--
	e.used = time.Now()
	h.mu.Unlock()
}

// Sources is empty: a reload rebuilds pooled targets, it does not rewrap
// them (bridge.Reconfigurable).
func (h *Handler) Sources() []source.Source { return nil }

// Reconfigure reads the configuration file again and takes mapper; on an
// error nothing changes (bridge.Reconfigurable: list the Handler first).
func (h *Handler) Reconfigure(mapper *mapping.Mapper, _ []source.Source) error {
	h.mu.Lock()
	file := h.cfg.file
	h.mu.Unlock()
	cfg, err := Load(file)
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.mapper = mapper
	h.mappers = nil
	h.mu.Unlock()
	h.Reload(cfg)
	return nil
}

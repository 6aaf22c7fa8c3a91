package bridge

import (
	"cmp"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pcp-exporter/pcp-exporter/internal/selfmetric"
	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// Source is one PCP source served by a Collector.
type Source struct {
	// Name identifies the source in self-metrics and logs (an MMV
	// directory, an archive path).
	Name string
	Src  source.Source
	// When maps the wall time of a scrape to the time to fetch: nil for
	// live sources (the wall time); an archive replay maps it into the
	// archive. ok false means there is nothing to serve at this time.
	When func(now time.Time) (t time.Time, ok bool)
	// Context are labels describing the source that its metrics lack, as
	// PCP context labels (a live MMV directory: the exporter's hostname).
	// They go into target_info and the OpenTelemetry resource.
	Context []mapping.LabelPair
}

// Collector is a prometheus.Collector serving PCP sources. Collect reads
// every source once per scrape; scrapes are serialized.
type Collector struct {
	mapper  *mapping.Mapper
	logger  *slog.Logger
	now     func() time.Time
	mu      sync.Mutex
	sources []*sourceState
	ready   chan struct{}
	once    sync.Once
	// reads counts the fast path's reads.
	reads uint64
	block []byte // a label block being rendered (reused)
	// clashes are the name clashes logged (source, metric, detail)
	clashes map[string]struct{}
	// otel maps the sources for the OpenTelemetry outputs too (OTel), at
	// every remap
	otel bool
	// shared: a family name is served by several sources (several hosts'
	// pmcds), whose series the fast path gathers into one family
	shared bool
	merge  familyMerge
	// keep and namespace are a driven read's (ReadOptions)
	keep      func(*mapping.Family) bool
	namespace [][]mapping.LabelPair

	upDesc, lagDesc, servedDesc, durDesc, errDesc, skipDesc, filesDesc, famDesc *prometheus.Desc
	// what sources leave out (source.Limited)
	malformedDesc, limitDesc, cutDesc *prometheus.Desc
	// the metrics a server answered with an error (source.MetricErrorer)
	metricErrDesc, metricErrTotalDesc *prometheus.Desc
}

type sourceState struct {
	Source
	ms     []source.Metric // the source's metrics at epoch
	target []mapping.LabelPair
	domain []string // target labels from domain labels (SourceTarget)
	epoch  uint64   // the epoch of ms (source.MetricsEpochOf)
	sig    uint64
	// mapped is the shared mapping whose families, skipped and pmids
	// these are (shared.go), nil when they are the source's own
	mapped   *mapped
	families []mapping.Family
	skipped  []mapping.Skipped
	pmids    []semantics.PMID
	descs    []map[string]*prometheus.Desc
	// otel are the families of the OpenTelemetry outputs (mapped by the
	// mapper's OTel form when the collector has an OTelProducer), with
	// their PMIDs
	otel      []mapping.Family
	otelPMIDs []semantics.PMID
	res       source.Result
	errors    float64
	status    source.Status // after the last read; Reason "error" when it failed
	// served is the time of the values the last read served (res.Time),
	// zero when it served none
	served   time.Time
	logged   source.Status // the status last logged, to log once per change
	duration float64
	// insts and instList hold the instances of one read, by domain
	// (instList's index); the map and the list are kept for the next read
	insts    map[semantics.InDom]int
	instList []readInsts
	// names names the instances of a source with history (an archive
	// replay) across reads, asking it again only when a read's time
	// leaves the span of its last answer; nil for other sources, whose
	// instances insts holds for one read
	names *source.InstanceNames
	at    time.Time // the time of res: instances are named as then
	// msData, msLen and msSig: the metric set last hashed (its slice) and
	// its signature, so that a source answering with the same slice is
	// not hashed again (shared.go keys its mappings by the same)
	msData *source.Metric
	msLen  int
	msSig  uint64
	text   textCache
}

// New returns a Collector over sources, mapped by mapper.
func New(mapper *mapping.Mapper, logger *slog.Logger, sources ...Source) *Collector {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &Collector{mapper: mapper, logger: logger, now: time.Now, ready: make(chan struct{})}
	for _, s := range sources {
		s.Src = mapper.Wrap(s.Src) // the node naming's families
		c.sources = append(c.sources, &sourceState{Source: s})
	}
	c.upDesc = selfmetric.SourceUp.Desc()
	c.lagDesc = selfmetric.SourceLag.Desc()
	c.servedDesc = selfmetric.SourceServed.Desc()
	c.durDesc = selfmetric.SourceFetchDuration.Desc()
	c.errDesc = selfmetric.SourceErrors.Desc()
	c.skipDesc = selfmetric.MetricsSkipped.Desc()
	c.famDesc = selfmetric.MetricsExported.Desc()
	c.filesDesc = selfmetric.MMVFiles.Desc()
	c.malformedDesc = selfmetric.LabelsMalformed.Desc()
	c.limitDesc = selfmetric.SeriesLimit.Desc()
	c.cutDesc = selfmetric.SeriesLeftOut.Desc()
	c.metricErrDesc = selfmetric.MetricErrors.Desc()
	c.metricErrTotalDesc = selfmetric.MetricErrorsTotal.Desc()
	return c
}

// Release drops what the collector and its sources keep from one read to
// the next for speed (the values read, the sources' buffers: see
// source.Releaser), for a collector read seldom (a pooled /probe target
// between its probes); the next read allocates them anew.
func (c *Collector) Release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.sources {
		s.res = source.Result{}
		s.insts, s.instList = nil, nil
		source.ReleaseOf(s.Src)
	}
}

// Ready is closed once every source has been read successfully once.
func (c *Collector) Ready() <-chan struct{} { return c.ready }

// Describe sends nothing: the metric families depend on the sources'
// current metadata (an unchecked collector).
func (c *Collector) Describe(chan<- *prometheus.Desc) {}

// Collect reads every source and sends its samples and the self-metrics.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.read(c.now(), nil, false, func(s *sourceState, i int, f *mapping.Family, iv source.InstValue, inst *source.Instance) {
		c.sendConst(ch, s, i, f, iv, inst)
	}, nil)
	c.sendTargets(ch, nil)
	c.sendSelf(ch)
}

// valueVisitor receives one value of family i of source s.
type valueVisitor func(s *sourceState, i int, f *mapping.Family, iv source.InstValue, inst *source.Instance)

// failedVisitor receives the error of a value set that family i of source s
// was answered with instead of values.
type failedVisitor func(s *sourceState, i int, f *mapping.Family, err error)

// read fetches every source once at now (remapping those whose metrics changed)
// and hands every value of the families sel selects (all when nil) to
// visit: the Prometheus families, or with otel the OpenTelemetry ones;
// value sets answered with an error go to failed (when not nil). It
// records the self-metrics state and returns the sources' errors. Every
// output reads through it: the sources are opened once, and one reading
// gives the metric set, the values and the instances.
func (c *Collector) read(now time.Time, sel *Selection, otel bool, visit valueVisitor, failed failedVisitor) error {
	c.loadMetrics()
	return c.readLoaded(now, sel, otel, visit, failed)
}

// readLoaded is read right after loadMetrics (the fast path loads the
// metrics first to know whether families are merged: loading them twice
// would hash the metric sets twice).
func (c *Collector) readLoaded(now time.Time, sel *Selection, otel bool, visit valueVisitor, failed failedVisitor) error {
	allOK := true
	var errs []error
	for _, s := range c.sources {
		start := time.Now()
		err := c.readSource(s, now, sel, otel, visit, failed)
		s.duration = time.Since(start).Seconds()
		s.status = source.StatusOf(s.Src, now)
		if err != nil {
			s.errors++
			s.status.Reason, s.status.Detail = source.ReasonError, s.Name+": "+err.Error()
			errs = append(errs, err)
		}
		if s.status.Reason != source.ReasonUp {
			allOK = false
		}
		c.logStatus(s)
	}
	if allOK {
		c.once.Do(func() { close(c.ready) })
	}
	return errors.Join(errs...)
}

// loadMetrics loads the sources' metric sets that changed and maps them
// again if any did.
func (c *Collector) loadMetrics() {
	remap := false
	for _, s := range c.sources {
		if s.loadMetrics() {
			remap = true
		}
	}
	if remap {
		c.remap()
	}
}

// logStatus logs a source's status when its reason or detail changed since
// the last one logged: one line per change of state, not per scrape.
func (c *Collector) logStatus(s *sourceState) {
	st := s.status
	switch {
	case st.Reason == s.logged.Reason && st.Detail == s.logged.Detail:
	case st.Reason == source.ReasonUp:
		c.logger.Info("PCP source is up", "source", s.Name, "was", string(s.logged.Reason))
	case st.Reason == source.ReasonError:
		c.logger.Warn("reading PCP source failed", "source", s.Name, "err", st.Detail)
	default:
		c.logger.Warn("PCP source is down", "source", s.Name, "reason", string(st.Reason), "detail", st.Detail)
	}
	s.logged = st
}

// sendSelf sends the self-metrics of the last read.
func (c *Collector) sendSelf(ch chan<- prometheus.Metric) {
	for _, s := range c.sources {
		up := 0.0
		if s.status.Reason == source.ReasonUp {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(c.upDesc, prometheus.GaugeValue, up, s.Name, string(s.status.Reason))
		if s.status.Lag >= 0 {
			ch <- prometheus.MustNewConstMetric(c.lagDesc, prometheus.GaugeValue, s.status.Lag.Seconds(), s.Name)
		}
		// the archive time served, for sources that serve one (a replay
		// maps the scrape's time, a followed archive reports a lag): in the
		// same scrape as the values, so a reader can tell what each scrape
		// served without timestamps on the samples
		if !s.served.IsZero() && (s.When != nil || s.status.Lag >= 0) {
			ch <- prometheus.MustNewConstMetric(c.servedDesc, prometheus.GaugeValue, float64(s.served.UnixMicro())/1e6, s.Name)
		}
		ch <- prometheus.MustNewConstMetric(c.durDesc, prometheus.GaugeValue, s.duration, s.Name)
		ch <- prometheus.MustNewConstMetric(c.errDesc, prometheus.CounterValue, s.errors, s.Name)
		ch <- prometheus.MustNewConstMetric(c.famDesc, prometheus.GaugeValue, float64(len(s.families)), s.Name)
		reasons := map[mapping.SkipReason]int{}
		for _, sk := range s.skipped {
			reasons[sk.Reason]++
		}
		for r, n := range reasons {
			ch <- prometheus.MustNewConstMetric(c.skipDesc, prometheus.GaugeValue, float64(n), s.Name, string(r))
		}
		if lo, ok := source.LeftOutOf(s.Src); ok {
			ch <- prometheus.MustNewConstMetric(c.malformedDesc, prometheus.GaugeValue, float64(lo.MalformedLabels), s.Name)
			ch <- prometheus.MustNewConstMetric(c.limitDesc, prometheus.GaugeValue, float64(lo.SeriesLimit), s.Name)
			ch <- prometheus.MustNewConstMetric(c.cutDesc, prometheus.GaugeValue, float64(lo.SeriesCut), s.Name, "values")
			ch <- prometheus.MustNewConstMetric(c.cutDesc, prometheus.GaugeValue, float64(lo.InstancesCut), s.Name, "instances")
		}
		if last, total, ok := source.MetricErrorsOf(s.Src); ok {
			for code, n := range last {
				ch <- prometheus.MustNewConstMetric(c.metricErrDesc, prometheus.GaugeValue, float64(n), s.Name, strconv.Itoa(int(code)))
			}
			ch <- prometheus.MustNewConstMetric(c.metricErrTotalDesc, prometheus.CounterValue, float64(total), s.Name)
		}
		if exp, not, ok := source.FileCountsOf(s.Src); ok {
			ch <- prometheus.MustNewConstMetric(c.filesDesc, prometheus.GaugeValue, float64(exp), s.Name, "true")
			ch <- prometheus.MustNewConstMetric(c.filesDesc, prometheus.GaugeValue, float64(not), s.Name, "false")
		}
	}
}

// remap maps every source's metrics again, in source order, so that name
// clashes across sources resolve the same way every time: into Prometheus's
// families, and OpenTelemetry's when the collector has an OTelProducer.
func (c *Collector) remap() {
	c.mapPrometheus()
	if c.otel {
		c.mapOTel()
	}
}

// mapOTel maps the sources into the OpenTelemetry form: the same families
// when the naming is OpenTelemetry's too (one fetch request for both), else
// its own names, so its own namespace.
func (c *Collector) mapOTel() {
	om := c.mapper.OTel()
	if om == c.mapper {
		for _, s := range c.sources {
			s.otel, s.otelPMIDs = s.families, s.pmids
		}
		return
	}
	targets := make([][]mapping.LabelPair, len(c.sources))
	for i, s := range c.sources {
		targets[i] = s.target
	}
	ns := c.newNamespace(targets)
	for _, s := range c.sources {
		s.otel, _ = om.MapSource(s.ms, s.target, ns)
		s.otel = c.kept(s.otel)
		s.otelPMIDs = nil
		for _, f := range s.otel {
			s.otelPMIDs = append(s.otelPMIDs, f.Desc.PMID)
		}
	}
}

// mapPrometheus maps the sources into Prometheus's families.
func (c *Collector) mapPrometheus() {
	if len(c.sources) == 1 && c.keep == nil && c.namespace == nil {
		// alone, the mapping depends only on the source: shared with
		// other collectors of the same metrics (shared.go)
		s := c.sources[0]
		s.target, s.domain = c.mapper.SourceTarget(s.ms, s.context())
		c.shared = false // no other source's families
		e := mapShared(c.mapper, s.ms)
		s.mapped, s.families, s.skipped, s.pmids = e, e.families, e.skipped, e.pmids
		s.logClashes(c)
		s.descs = make([]map[string]*prometheus.Desc, len(s.families))
		return
	}
	targets := make([][]mapping.LabelPair, len(c.sources))
	for i, s := range c.sources {
		s.target, s.domain = c.mapper.SourceTarget(s.ms, s.context())
		targets[i] = s.target
	}
	ns := c.newNamespace(targets)
	names := map[string]bool{}
	c.shared = false
	for _, s := range c.sources {
		s.families, s.skipped = c.mapper.MapSource(s.ms, s.target, ns)
		s.families = c.kept(s.families)
		for _, f := range s.families {
			c.shared = c.shared || names[f.Name]
		}
		for _, f := range s.families {
			names[f.Name] = true
		}
		s.logClashes(c)
		if s.mapped != nil {
			s.mapped, s.pmids = nil, nil // not to write into the shared one's
		}
		s.pmids = s.pmids[:0]
		for _, f := range s.families {
			s.pmids = append(s.pmids, f.Desc.PMID)
		}
		s.descs = make([]map[string]*prometheus.Desc, len(s.families))
	}
}

// logClashes logs the source's metrics skipped for a name clash (once).
func (s *sourceState) logClashes(c *Collector) {
	for _, sk := range s.skipped {
		if sk.Reason == mapping.SkipNameClash {
			c.logClash(s.Name, sk)
		}
	}
}

// view returns the families read (Prometheus's, or with otel
// OpenTelemetry's) and their PMIDs.
func (s *sourceState) view(otel bool) ([]mapping.Family, []semantics.PMID) {
	if otel {
		return s.otel, s.otelPMIDs
	}
	return s.families, s.pmids
}

// maxClashesLogged bounds the name clashes remembered as logged.
const maxClashesLogged = 4096

// logClash logs a name clash the first time it is seen: a source whose
// metric set changes again and again (MMV files coming and going) is
// remapped each time, with the same clashes.
func (c *Collector) logClash(src string, sk mapping.Skipped) {
	k := src + "\x00" + sk.PCPName + "\x00" + sk.Detail
	if _, ok := c.clashes[k]; ok {
		return
	}
	if c.clashes == nil || len(c.clashes) >= maxClashesLogged {
		c.clashes = map[string]struct{}{}
	}
	c.clashes[k] = struct{}{}
	c.logger.Warn("metric skipped: name clash (logged once)", "source", src, "metric", sk.PCPName, "detail", sk.Detail)
}

// context is the source's context labels kept apart from its metrics
// (source.ContextApart), then its Context.
func (s *sourceState) context() []mapping.LabelPair {
	ls, ok := source.ContextLabelsOf(s.Src)
	if !ok {
		return s.Context
	}
	return append(mapping.ContextPairs(ls), s.Context...)
}

// loadMetrics reads the source's metrics and their epoch; true
// when they differ from the last ones mapped.
func (s *sourceState) loadMetrics() bool {
	s.ms, s.epoch = source.MetricsEpochOf(s.Src)
	if d := unsafe.SliceData(s.ms); d != s.msData || len(s.ms) != s.msLen || d == nil {
		s.msData, s.msLen, s.msSig = d, len(s.ms), signature(s.ms)
	}
	sig := s.msSig
	if ls, ok := source.ContextLabelsOf(s.Src); ok {
		sig = labelsSignature(sig, ls)
	}
	if sig == s.sig {
		return false
	}
	s.sig = sig
	s.names = nil
	if source.HasInDomHistory(s.Src) {
		s.names = source.NewInstanceNames(s.Src)
	}
	return true
}

// signature hashes what the mapping of a metric set depends on: each
// metric's name and whole descriptor (PMID, type, instance domain,
// semantics, units), its help texts and its labels. A file re-created under
// the same name with the same metric names (so the same PMIDs) but another
// unit or semantics is mapped anew. It runs at every read (2,374 metrics
// and 0.6 MB of help of a local pmcd), so strings are hashed by maphash,
// not byte by byte.
func signature(ms []source.Metric) uint64 {
	h := uint64(sigOffset)
	for i := range ms {
		m := &ms[i]
		d := &m.Desc
		h = sigString(h, m.Name)
		h = sigMix(h, uint64(d.PMID)<<32|uint64(d.InDom))
		h = sigMix(h, uint64(uint16(d.Sem))<<48|uint64(uint16(d.Type))<<32|uint64(d.Units.Word()))
		h = sigString(h, m.OneLine)
		h = sigString(h, m.Help)
		h = labelsSignature(h, m.Labels)
	}
	return h
}

// labelsSignature hashes a label set into h.
func labelsSignature(h uint64, ls semantics.LabelSet) uint64 {
	for _, l := range ls {
		h = sigString(h, l.Name)
		h = sigString(h, l.Value)
		h = sigMix(h, uint64(l.Flags))
	}
	return h
}

// Signatures are compared within the process only: one random seed.
var sigSeed = maphash.MakeSeed()

const sigOffset = 14695981039346656037

// sigString mixes a string's hash (which covers its length) into h.
func sigString(h uint64, s string) uint64 { return sigMix(h, maphash.String(sigSeed, s)) }

// sigMix mixes x into h, in order (a multiply-xorshift step).
func sigMix(h, x uint64) uint64 {
	h = (h ^ x) * 0x9e3779b97f4a7c15
	return h ^ h>>29
}

// readSource reads one source for read; its errors do not name the source.
func (c *Collector) readSource(s *sourceState, now time.Time, sel *Selection, otel bool, visit valueVisitor, failed failedVisitor) error {
	s.served = time.Time{}
	t := now
	if s.When != nil {
		var ok bool
		if t, ok = s.When(now); !ok {
			return nil
		}
	}
	// A source may change its metrics under us (an MMV directory rescanned
	// during the fetch renumbers clusters, so a PMID can name another
	// file's metric): read again, remapped, until the metrics, the values
	// and the instances all come from one metric set.
	for attempt := 0; ; attempt++ {
		fams, pmids := s.view(otel)
		if len(pmids) == 0 && s.epoch == source.EpochOf(s.Src) {
			return nil
		}
		if len(pmids) > 0 {
			if err := s.Src.Fetch(t, pmids, &s.res); err != nil {
				return err
			}
			s.served = s.res.Time
		}
		clear(s.insts)
		s.instList, s.at = s.instList[:0], t
		for i := range fams {
			if i < len(s.res.Sets) && s.res.Sets[i].Err == nil && len(s.res.Sets[i].Values) > 0 && fams[i].Desc.InDom != semantics.InDomNull {
				s.instance(fams[i].Desc.InDom, s.res.Sets[i].Values[0].Inst)
			}
		}
		if source.EpochOf(s.Src) == s.epoch {
			break
		}
		if attempt == 3 {
			return fmt.Errorf("metrics kept changing during %d reads", attempt+1)
		}
		if s.loadMetrics() {
			c.remap()
		}
	}
	fams, _ := s.view(otel)
	for i := range fams {
		if i >= len(s.res.Sets) {
			break
		}
		f := &fams[i]
		set := &s.res.Sets[i]
		if !sel.Family(f) {
			continue
		}
		if set.Err != nil {
			if failed != nil {
				failed(s, i, f, set.Err)
			}
			continue
		}
		for _, iv := range set.Values {
			var inst *source.Instance
			if f.Desc.InDom != semantics.InDomNull {
				inst = s.instance(f.Desc.InDom, iv.Inst)
			}
			visit(s, i, f, iv, inst)
		}
	}
	return nil
}

// value is a sample's value in the family's unit (rounded as pmproxy prints
// it with the pmproxy naming); 1 for an info metric.
func (c *Collector) value(f *mapping.Family, v semantics.Value) float64 {
	if f.Type == mapping.Info {
		return 1
	}
	return f.PrometheusValue(v)
}

// sendConst sends one value as a const metric.
func (c *Collector) sendConst(ch chan<- prometheus.Metric, s *sourceState, i int, f *mapping.Family, iv source.InstValue, inst *source.Instance) {
	labels := f.Labels(inst)
	names := make([]string, 0, len(labels)+1)
	values := make([]string, 0, len(labels)+1)
	for _, l := range labels {
		names = append(names, l.Name)
		values = append(values, l.Value)
	}
	vt := prometheus.GaugeValue
	switch f.Type {
	case mapping.Info:
		names = append(names, mapping.InfoValueLabel)
		values = append(values, strings.ToValidUTF8(iv.Value.Str(), "\uFFFD"))
	case mapping.Counter:
		vt = prometheus.CounterValue
	case mapping.Untyped:
		vt = prometheus.UntypedValue
	}
	key := strings.Join(names, "\xff")
	if s.descs[i] == nil {
		s.descs[i] = map[string]*prometheus.Desc{}
	}
	d := s.descs[i][key]
	if d == nil {
		d = prometheus.V2.NewDesc(f.Name, f.Help, prometheus.UnconstrainedLabels(names), nil, prometheus.WithUnit(f.Unit))
		s.descs[i][key] = d
	}
	var m prometheus.Metric
	var err error
	if created := s.created(f, s.at); !created.IsZero() {
		m, err = prometheus.NewConstMetricWithCreatedTimestamp(d, vt, c.value(f, iv.Value), created, values...)
	} else {
		m, err = prometheus.NewConstMetric(d, vt, c.value(f, iv.Value), values...)
	}
	if err != nil {
		c.logger.Debug("sample dropped", "metric", f.PCPName, "err", err)
		return
	}
	ch <- m
}

// created is the start of a counter family's series when known (the
// source's generation at the time t of the fetch: an MMV file's creation,
// an archive's start or last mark, pmcd's start), else zero.
func (s *sourceState) created(f *mapping.Family, t time.Time) time.Time {
	if f.Type != mapping.Counter {
		return time.Time{}
	}
	if g := source.GenerationOf(s.Src, f.Desc.PMID); !g.After(t) {
		return g
	}
	return time.Time{}
}

// instance finds an instance of a domain, named as at the fetch's time
// (asked of the source once a read).
func (s *sourceState) instance(indom semantics.InDom, id int32) *source.Instance {
	if s.names != nil {
		in, _ := s.names.Lookup(indom, id, s.at)
		return in
	}
	k, ok := s.insts[indom]
	if !ok {
		if s.insts == nil {
			s.insts = map[semantics.InDom]int{}
		}
		ins, _ := source.InstancesInForce(s.Src, indom, s.at)
		k = len(s.instList)
		s.instList = append(s.instList, readInsts{ins: ins, sorted: slices.IsSortedFunc(ins, byID)})
		s.insts[indom] = k
	}
	if in := s.instList[k].find(id); in != nil {
		return in
	}
	return &source.Instance{ID: id, Name: fmt.Sprint(id)}
}

// readInsts are a domain's instances for one read, in id order as
// source.Source's Instances promises (sorted says whether they are; if
// not, they are searched one by one).
type readInsts struct {
	ins    []source.Instance
	next   int // where find looks first: a value set lists its instances in order
	sorted bool
}

func byID(a, b source.Instance) int { return cmp.Compare(a.ID, b.ID) }

// find returns instance id, nil when the domain has none.
func (r *readInsts) find(id int32) *source.Instance {
	i := r.next
	if i >= len(r.ins) || r.ins[i].ID != id {
		if r.sorted {
			var ok bool
			if i, ok = slices.BinarySearchFunc(r.ins, id, func(in source.Instance, id int32) int { return cmp.Compare(in.ID, id) }); !ok {
				return nil
			}
		} else if i = slices.IndexFunc(r.ins, func(in source.Instance) bool { return in.ID == id }); i < 0 {
			return nil
		}
	}
	r.next = i + 1
	return &r.ins[i]
}

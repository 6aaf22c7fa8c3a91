package derive

import (
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// Domain is the PMID domain of derived metrics (DYNAMIC_PMID).
const Domain = 511

// firstItem is the item of the first configured derived metric: libpcp
// registers the anonymous metrics event.flags (511.0.1) and event.missed
// (511.0.2) first.
const firstItem = 3

// GlobalPMID returns the PMID libpcp gives the i-th (from 0) registered
// derived metric of the configuration: 511.0.3 ascending, skipping item 0
// when moving to the next cluster.
func GlobalPMID(i int) semantics.PMID {
	n := i + firstItem - 1 // items 1..1023 in each cluster
	return semantics.NewPMID(Domain, uint32(n/1023), uint32(n%1023+1))
}

// AnonMetrics returns the two anonymous derived metrics libpcp defines in
// every context (pminfo lists them for any archive): event.flags and
// event.missed, which never have values.
func AnonMetrics() []source.Metric {
	d := func(item uint32) semantics.Desc {
		return semantics.Desc{PMID: semantics.NewPMID(Domain, 0, item), Type: semantics.TypeU32, InDom: semantics.InDomNull, Sem: semantics.SemDiscrete}
	}
	return []source.Metric{
		{Name: "event.flags", Desc: d(1), OneLine: "Flags for event records",
			Help: "An anonymous derived metric that is used to encode the event flags\nassociated with event records.   See pmUnpackEventRecords(3)."},
		{Name: "event.missed", Desc: d(2), OneLine: "Count of missed event records",
			Help: "An anonymous derived metric that is used to encode the number of\nevent records missed because either the PMDA could not keep up\nor the PMAPI client did not collect the event records fast\nenough.  See pmUnpackEventRecords(3)."},
	}
}

// Source is a source.Source with derived metrics added: its metrics are
// those of the wrapped source plus the derived metrics whose operands it
// has (with the descriptors libpcp computes for them), and a Fetch of
// derived metrics fetches their operands and evaluates them.
type Source struct {
	mu     sync.Mutex // Metrics and Fetch may come from concurrent scrapes
	src    source.Source
	defs   []Definition
	logger *slog.Logger

	dm      []derivedMetric
	byPMID  map[semantics.PMID]int
	sig     string
	metrics []source.Metric
	errs    []error

	inner   source.Result
	want    []semantics.PMID
	sets    map[semantics.PMID]*source.ValueSet
	ctx     evalCtx
	hasWant map[semantics.PMID]bool
}

type derivedMetric struct {
	def      Definition
	pmid     semantics.PMID
	root     *bnode // nil when the metric is absent from this source
	operands []semantics.PMID
}

// Wrap adds the derived metrics defs to src. PMIDs are assigned in the
// order of defs as libpcp assigns them to registered metrics (511.0.3,
// 511.0.4, ...). A definition whose operands are not all metrics of src is
// silently absent, as in libpcp; one with a semantic error is absent and its
// error is logged (and returned by Errors). A definition named like a metric
// of src is ignored: the real metric wins.
func Wrap(src source.Source, defs []Definition, logger *slog.Logger) (*Source, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	w := &Source{src: src, defs: defs, logger: logger, sets: map[semantics.PMID]*source.ValueSet{}, hasWant: map[semantics.PMID]bool{}}
	w.ctx.sets = w.sets
	// matchinst() names an instance when it first sees it, as it is named
	// at that fetch's time (libpcp's pmNameInDom at the result's stamp)
	w.ctx.insts = func(indom semantics.InDom) []source.Instance {
		ins, _ := source.InstancesInForce(src, indom, w.ctx.t)
		return ins
	}
	w.refresh()
	return w, nil
}

// Errors returns the semantic errors found when the definitions were last
// bound to the wrapped source's metrics.
func (w *Source) Errors() []error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.errs
}

// signature identifies the metric set of the wrapped source.
func signature(ms []source.Metric) string {
	b := make([]byte, 0, len(ms)*24)
	for _, m := range ms {
		b = append(b, m.Name...)
		d := m.Desc
		b = append(b, 0, byte(d.PMID), byte(d.PMID>>8), byte(d.PMID>>16), byte(d.PMID>>24),
			byte(d.Type), byte(d.Sem), byte(d.InDom), byte(d.InDom>>8), byte(d.InDom>>16), byte(d.InDom>>24))
		u := d.Units.Word()
		b = append(b, byte(u), byte(u>>8), byte(u>>16), byte(u>>24))
	}
	return string(b)
}

// refresh binds the definitions to the wrapped source's metrics when they
// changed (an MMV directory whose files come and go), resetting the state of
// delta() and rate().
func (w *Source) refresh() { w.bind(w.src.Metrics()) }

// bind binds the definitions to base, the wrapped source's metrics, when
// they changed.
func (w *Source) bind(base []source.Metric) {
	sig := signature(base)
	if w.metrics != nil && sig == w.sig {
		return
	}
	w.sig = sig
	w.dm, w.metrics, w.errs = bindAll(base, w.defs)
	w.byPMID = make(map[semantics.PMID]int, len(w.dm))
	for i := range w.dm {
		w.byPMID[w.dm[i].pmid] = i
	}
	for _, err := range w.errs {
		w.logger.Warn(err.Error())
	}
}

// Describe returns base (the metrics of a source) with the derived metrics
// defs added, in name order, as Wrap does, and the semantic errors: for
// showing derived descriptors without fetching values.
func Describe(base []source.Metric, defs []Definition) ([]source.Metric, []error) {
	_, ms, errs := bindAll(base, defs)
	return ms, errs
}

// bindAll binds every definition to the metrics of a source.
func bindAll(base []source.Metric, defs []Definition) ([]derivedMetric, []source.Metric, []error) {
	descs := make(map[string]semantics.Desc, len(base))
	for _, m := range base {
		if _, dup := descs[m.Name]; !dup {
			descs[m.Name] = m.Desc
		}
	}
	lookup := func(name string) (semantics.Desc, bool) {
		d, ok := descs[name]
		return d, ok
	}
	var errs []error
	dm := make([]derivedMetric, 0, len(defs))
	metrics := append([]source.Metric(nil), base...)
	for i, def := range defs {
		m := derivedMetric{def: def, pmid: GlobalPMID(i)}
		if _, real := descs[def.Name]; !real && def.Expr != nil {
			if root, ok := bind(def.Expr.Root, lookup, false); ok {
				if err := check(def.Name, root); err != nil {
					errs = append(errs, err)
				} else {
					root.desc.PMID = m.pmid
					m.root = root
					m.operands = operands(root, nil)
					metrics = append(metrics, source.Metric{Name: def.Name, Desc: root.desc, OneLine: def.OneLine, Help: def.Help})
				}
			}
		}
		dm = append(dm, m)
	}
	sort.SliceStable(metrics, func(i, j int) bool { return metrics[i].Name < metrics[j].Name })
	return dm, metrics, errs
}

func operands(b *bnode, out []semantics.PMID) []semantics.PMID {
	if b == nil {
		return out
	}
	out = operands(b.left, out)
	out = operands(b.right, out)
	if b.op == OpName && b.pmid != semantics.PMIDNull {
		for _, p := range out {
			if p == b.pmid {
				return out
			}
		}
		out = append(out, b.pmid)
	}
	return out
}

// Metrics returns the wrapped source's metrics and the derived metrics, in
// name order.
func (w *Source) Metrics() []source.Metric {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.refresh()
	return w.metrics
}

// MetricsEpoch returns Metrics and the wrapped source's epoch they belong
// to (source.EpochLister).
func (w *Source) MetricsEpoch() ([]source.Metric, uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	base, e := source.MetricsEpochOf(w.src)
	w.bind(base)
	return w.metrics, e
}

// Instances returns the instances of an instance domain of the wrapped
// source (derived metrics use their operands' instance domains).
func (w *Source) Instances(indom semantics.InDom) []source.Instance { return w.src.Instances(indom) }

// Unwrap returns the wrapped source (source.Wrapper): its capabilities
// (epoch, generations, files, status) are the derived source's, and derived
// metrics are bound to its metric set.
func (w *Source) Unwrap() source.Source { return w.src }

// Underlying returns the source that src adds derived metrics to when src
// is derived metrics (Wrap's), else src itself: what a reload wraps anew.
func Underlying(src source.Source) source.Source {
	if w, ok := src.(*Source); ok {
		return w.src
	}
	return src
}

// Close closes the wrapped source.
func (w *Source) Close() error { return w.src.Close() }

// Fetch fetches pmids at t: the metrics of the wrapped source as it returns
// them, the derived ones evaluated over a fetch of their operands. delta()
// and rate() compare with the previous Fetch of the same derived metric and
// have no value on the first one.
//
// Byte payloads (STRING values) of derived metrics are valid until the next
// Fetch on this Source.
func (w *Source) Fetch(t time.Time, pmids []semantics.PMID, res *source.Result) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.want = w.want[:0]
	clear(w.hasWant)
	hasDerived := false
	for _, p := range pmids {
		if i, ok := w.derivedIndex(p); ok {
			hasDerived = true
			for _, op := range w.dm[i].operands {
				if !w.hasWant[op] {
					w.hasWant[op] = true
					w.want = append(w.want, op)
				}
			}
			continue
		}
		if p.Domain() == Domain && p.Cluster() == 0 && (p.Item() == 1 || p.Item() == 2) {
			continue // event.flags, event.missed
		}
		if !w.hasWant[p] {
			w.hasWant[p] = true
			w.want = append(w.want, p)
		}
	}
	if !hasDerived && len(w.want) == len(pmids) {
		return w.src.Fetch(t, pmids, res)
	}
	w.inner.Sets = w.inner.Sets[:0]
	if len(w.want) > 0 {
		if err := w.src.Fetch(t, w.want, &w.inner); err != nil {
			return err
		}
	} else {
		w.inner.Time = t
	}
	clear(w.sets)
	for i := range w.inner.Sets {
		w.sets[w.inner.Sets[i].PMID] = &w.inner.Sets[i]
	}
	res.Time = w.inner.Time
	w.ctx.t = w.inner.Time
	if w.ctx.t.IsZero() {
		w.ctx.t = t
	}
	if cap(res.Sets) < len(pmids) {
		res.Sets = append(res.Sets[:cap(res.Sets)], make([]source.ValueSet, len(pmids)-cap(res.Sets))...)
	}
	res.Sets = res.Sets[:len(pmids)]
	for k, p := range pmids {
		out := &res.Sets[k]
		out.PMID = p
		out.Err = nil
		out.Values = out.Values[:0]
		if i, ok := w.derivedIndex(p); ok {
			m := &w.dm[i]
			if m.root == nil {
				out.Err = semantics.ErrPMID
				continue
			}
			if err := m.root.eval(&w.ctx); err != nil {
				out.Err = err
				continue
			}
			for j := range m.root.vals {
				iv := &m.root.vals[j]
				out.Values = append(out.Values, source.InstValue{Inst: iv.inst, Value: valueOf(iv, m.root.desc.Type)})
			}
			continue
		}
		if s := w.sets[p]; s != nil {
			out.Err = s.Err
			out.Values = append(out.Values, s.Values...)
			continue
		}
		if p.Domain() == Domain {
			continue // anonymous metrics have no values
		}
		out.Err = semantics.ErrPMID
	}
	return nil
}

func (w *Source) derivedIndex(p semantics.PMID) (int, bool) {
	if p.Domain() != Domain {
		return 0, false
	}
	i, ok := w.byPMID[p]
	return i, ok
}

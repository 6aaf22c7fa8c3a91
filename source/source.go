// Package source defines what every PCP data source offers to the rest of the
// exporter: metric metadata (descriptors, names, help text, labels, instance
// domains) and a fetch of values at a time. Live MMV files (source/mmv) and
// archives (source/archive) implement it, derived metrics (derive) wrap it, and
// the mapping and every bridge consume it, so live export, replay and backfill
// share one path.
package source

import (
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
)

// Metric is the metadata of one metric.
type Metric struct {
	// Name is the metric's PCP name. A PMID with several names (aliases)
	// appears once per name, with the same Desc.
	Name    string
	Desc    semantics.Desc
	OneLine string // one-line help text, "" if none
	Help    string // long help text as pmLookupText(PM_TEXT_HELP) answers it: the one-line text where there is none; "" if neither
	// Labels are the merged labels of the metric (context < domain < indom <
	// cluster < item); each Label's Flags carries the level it came from.
	Labels semantics.LabelSet
}

// Instance is one instance of an instance domain.
type Instance struct {
	ID     int32
	Name   string
	Labels semantics.LabelSet // the instance's own labels (PM_LABEL_INSTANCES)
}

// InstValue is one value of a metric: the instance id (semantics.InNull for
// singular metrics) and the value.
type InstValue struct {
	Inst  int32
	Value semantics.Value
}

// ValueSet is the values of one metric in a Result (pmValueSet).
type ValueSet struct {
	PMID semantics.PMID
	// ValFmt is the encoding an archive record holds the values in
	// (pmValueSet's valfmt: semantics.ValInsitu, ValDptr or ValSptr), when
	// Values is not empty; other sources leave it 0. libpcp's interpolation
	// refuses a metric whose encoding changes from record to record.
	ValFmt uint8
	// Err is the PCP error of this metric at this fetch (for an archive record,
	// the numval < 0 code), nil when Values holds the (possibly zero) values.
	Err    error
	Values []InstValue
}

// Result is the answer of a fetch (pmResult). Sources reuse the slices of a
// Result passed back to Fetch, so a steady state fetch does not allocate; byte
// payloads of values are only valid until the next Fetch into the same Result.
type Result struct {
	Time time.Time
	Sets []ValueSet
}

// Optional capabilities. A source implements those that apply to it; a
// wrapper (derived metrics, a pinned view) forwards them by implementing
// Wrapper, and consumers ask through the *Of functions below, which look
// through wrappers. Nothing else is discovered by type assertion.

// Wrapper is implemented by sources that wrap another one (derive.Source):
// the capabilities below are the wrapped source's unless the wrapper
// implements them itself.
type Wrapper interface {
	Unwrap() Source
}

// Epoched is implemented by sources whose metric set can change under a
// reader between calls: an MMV directory renumbers clusters when files come
// and go, so after a rescan a PMID can name another file's metric. Epoch
// numbers the metric set without refreshing it (it only grows): the
// Metrics, Instances, Fetch and Generation answers obtained between two
// Epoch calls that return the same number all belong to one metric set
// (for MMV: the same files, generations and cluster numbers).
type Epoched interface {
	Epoch() uint64
}

// EpochLister is implemented by Epoched sources whose Metrics may itself
// start a new metric set (an MMV directory is listed again there): it
// returns the metrics and the epoch they belong to, read together.
type EpochLister interface {
	MetricsEpoch() ([]Metric, uint64)
}

// Generations is implemented by sources that know when a metric's counters
// started: an MMV file's generation (its creation time), an archive's start
// or its last mark, pmcd's start. Generation returns the zero time when it
// is not known (or pmid is not the source's).
type Generations interface {
	Generation(pmid semantics.PMID) time.Time
}

// FileSet is implemented by sources that read a changing set of files (an
// MMV directory): how many of the files seen are exported, and how many are
// skipped (with their reasons logged by the source).
type FileSet interface {
	FileCounts() (exported, skipped int)
}

// Limited is implemented by sources that leave out part of what their
// server sends rather than fail on it: malformed labels, and series
// beyond a limit (a pmcd sending a million instances).
type Limited interface {
	LeftOut() LeftOut
}

// LeftOut is what a source leaves out now.
type LeftOut struct {
	// MalformedLabels counts the labels of the metrics and instances
	// known now left out as malformed.
	MalformedLabels int
	// SeriesLimit is the source's limit on the values of a read (0:
	// none); SeriesCut counts the values the last read left out by it,
	// InstancesCut the instances left out of the instance domains.
	SeriesLimit, SeriesCut, InstancesCut int
}

// LeftOutOf returns what src leaves out; ok is false for a source that
// never leaves anything out.
func LeftOutOf(src Source) (LeftOut, bool) {
	if l, ok := capability[Limited](src); ok {
		return l.LeftOut(), true
	}
	return LeftOut{}, false
}

// MetricErrorer is implemented by sources whose server can answer a metric
// of a fetch with a PCP error instead of values (pmcd: a PMDA that cannot
// read it now): the metric is skipped for that fetch and counted here.
type MetricErrorer interface {
	// MetricErrors returns how many metrics the last fetch answered with
	// an error, by error, and how many such answers there were in all.
	MetricErrors() (last map[semantics.PMError]int, total uint64)
}

// MetricErrorsOf returns src's MetricErrors; ok is false for a source
// whose fetches never answer a metric with an error of its server.
func MetricErrorsOf(src Source) (last map[semantics.PMError]int, total uint64, ok bool) {
	if m, ok := capability[MetricErrorer](src); ok {
		last, total := m.MetricErrors()
		return last, total, true
	}
	return nil, 0, false
}

// Reason says why a source is down; "" when it is up.
type Reason string

// Reasons a source gives in its Status.
const (
	ReasonUp      Reason = ""
	ReasonMissing Reason = "missing" // what the user named does not exist (yet)
	ReasonStalled Reason = "stalled" // a followed archive stopped growing
	ReasonEnded   Reason = "ended"   // a replayed archive reached its end
	ReasonDown    Reason = "down"    // a server (pmcd) cannot be reached
	ReasonError   Reason = "error"   // the last read failed
)

// Status is a source's own account of its health at a time.
type Status struct {
	Reason Reason
	// Detail says why in words (the path, the error), for the log; "" when up.
	Detail string
	// Lag is how far the data served at that time is behind it (a followed
	// archive); negative when the source does not follow real time.
	Lag time.Duration
}

// Monitored is implemented by sources that can be missing, stalled, ended
// or down while their reads still succeed (or before any read).
type Monitored interface {
	Status(now time.Time) Status
}

// capability returns the first of src and the sources it wraps that
// implements T.
func capability[T any](src any) (T, bool) {
	for src != nil {
		if c, ok := src.(T); ok {
			return c, true
		}
		w, ok := src.(Wrapper)
		if !ok {
			break
		}
		src = w.Unwrap()
	}
	var zero T
	return zero, false
}

// EpochOf returns src's Epoch, 0 for a source whose metric set never
// changes under a reader.
func EpochOf(src Source) uint64 {
	if e, ok := capability[Epoched](src); ok {
		return e.Epoch()
	}
	return 0
}

// MetricsEpochOf returns src's metrics and the epoch they belong to. It is
// not looked up through wrappers, whose Metrics differ from the wrapped
// source's: a wrapper that forwards Epoched implements EpochLister itself,
// and for any other source the epoch is the one read before Metrics (a
// reader that finds it changed after its Fetch reads again).
func MetricsEpochOf(src Source) ([]Metric, uint64) {
	if l, ok := src.(EpochLister); ok {
		return l.MetricsEpoch()
	}
	e := EpochOf(src)
	return src.Metrics(), e
}

// GenerationOf returns when pmid's counters started in src (zero: unknown).
func GenerationOf(src Source, pmid semantics.PMID) time.Time {
	if g, ok := capability[Generations](src); ok {
		return g.Generation(pmid)
	}
	return time.Time{}
}

// FileCountsOf returns src's file counts; ok is false for a source that
// reads no changing set of files.
func FileCountsOf(src Source) (exported, skipped int, ok bool) {
	if f, ok := capability[FileSet](src); ok {
		e, s := f.FileCounts()
		return e, s, true
	}
	return 0, 0, false
}

// StatusOf returns src's Status at now: up with no lag for a source that
// does not report one.
func StatusOf(src Source, now time.Time) Status {
	if m, ok := capability[Monitored](src); ok {
		return m.Status(now)
	}
	return Status{Lag: -1}
}

// Source is a PCP data source.
type Source interface {
	// Metrics returns the metadata of every metric known now, in name order.
	Metrics() []Metric
	// Instances returns the instances of an instance domain known now, in
	// instance id order. For an archive replay that is every instance the
	// archives list for the domain at any time (the union, as
	// pmGetInDomArchive gives it), named as at the end; a fetch answers the
	// instances present at its time, and InDomHistory names them as then.
	Instances(indom semantics.InDom) []Instance
	// Fetch fills res with the values of the given metrics at time t, one
	// ValueSet per PMID in the given order. Live sources ignore t and use the
	// current time; archive replays interpolate at t.
	Fetch(t time.Time, pmids []semantics.PMID, res *Result) error
	// Close releases the source's resources.
	Close() error
}

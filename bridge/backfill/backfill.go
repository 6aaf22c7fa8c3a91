// Package backfill turns historical PCP archives into Prometheus samples
// with their original timestamps, mapped exactly as the live exporter maps
// them (package mapping), and writes them to a sink: TSDB blocks, remote
// write, or an OpenMetrics file for promtool. Samples are either every
// recorded value (raw) or values interpolated by libpcp's rules on a grid of
// multiples of a step (what `replay` gives): step.go reads the replay
// through bridge.Collector, the reading of a scrape and of the OTLP push,
// and raw.go reads the records. Memory stays bounded: archives are read
// incrementally and samples flow to the sink in batches. A run's outcome
// can be written for node_exporter's textfile collector (textfile.go).
package backfill

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pcp-exporter/pcp-exporter/bridge"
	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

// Series is one time series: its labels, __name__ included, sorted by name.
type Series struct {
	Labels []mapping.LabelPair
	Family *mapping.Family
	// Resource and Attrs are the series' OpenTelemetry resource and
	// data-point attributes (mapping.Resource, Family.Attributes; an info
	// metric's value included), as the live push gives them.
	Resource, Attrs []mapping.LabelPair
	// ID numbers the series of a run densely from 0, in order of
	// appearance: sinks keep their per-series state in slices by it.
	ID int
}

// Name returns the series' metric name.
func (s *Series) Name() string { return s.Family.Name }

// Sample is one value of a series at a time (milliseconds since the epoch).
type Sample struct {
	Series *Series
	T      int64
	V      float64
	// Start is a counter series' start (nanoseconds since the epoch; 0 for
	// other series), by bridge.CounterStart's rule with the archives'
	// generations (see run.start): OpenMetrics _created and OTLP start times
	// come from it, as the live exporter gives them.
	Start int64
}

// Sink receives samples in time order.
type Sink interface {
	// Write stores a batch and says what became of its samples: accepted
	// (stored, or acknowledged by the receiver), rejected for good with a
	// reason (the run goes on without them), or neither (not stored, or
	// sent without an answer). A non-nil error means the sink cannot go
	// on: the run stops. ctx ends with the run (SIGINT).
	Write(ctx context.Context, batch []Sample) (Outcome, error)
	Close() error
}

// Outcome is what a sink did with a batch.
type Outcome struct {
	Accepted int
	Rejected []Rejection
	// Unanswered counts samples sent without an answer when the run
	// stopped (interrupted during the request, or after one whose answer
	// was lost): the receiver may hold them.
	Unanswered int
	// Duplicated counts samples sent again after a request whose answer
	// was lost (a timeout, a connection closed after the request was
	// sent): the receiver may hold them twice.
	Duplicated int
}

// Rejection counts samples refused for one reason.
type Rejection struct {
	// Reason is a short class ("out of order", "HTTP 400"), the key of
	// Stats.RejectedBy.
	Reason string
	N      int
	// Detail is the receiver's message, with what to do about it.
	Detail string
}

// rejected is the number of samples o rejects.
func (o Outcome) rejected() int {
	n := 0
	for _, r := range o.Rejected {
		n += r.N
	}
	return n
}

// Options describe one backfill.
type Options struct {
	// Archives form one timeline (pmlogger's daily archives of a host), or
	// are the archives of several hosts: see Run.
	Archives []*pcplog.Archive
	Mapper   *mapping.Mapper
	// Step is the grid of interpolated samples; 0 writes every recorded
	// value (raw).
	Step time.Duration
	// Start and Finish bound the samples (zero: the archives' bounds).
	Start, Finish time.Time
	Interp        semantics.InterpRule
	// Wrap adds derived metrics to the replayed source (step mode).
	Wrap func(source.Source) (source.Source, error)
	// Progress is called after every batch.
	Progress func(Stats)
	// Families, when set, restricts the samples to these family names (the
	// OpenMetrics writer goes family by family).
	Families map[string]bool
	// Labels are added to every series (replacing a mapped label of the
	// same name), as vmctl's extra labels: job and instance, to join the
	// series with scraped ones.
	Labels []mapping.LabelPair
	// FailFast stops the run at the first rejected batch; otherwise a
	// rejected batch is counted, reported and the run goes on (as
	// Prometheus's remote-write client drops a batch refused as invalid).
	FailFast bool
	// TempDir holds the OpenMetrics writer's temporary files (default:
	// the system's); see WriteOpenMetrics.
	TempDir string
	// NoTargetInfo leaves target_info out (lean labels write it at every
	// sample time): for a sink that carries the target labels another way,
	// OTLP's resource.
	NoTargetInfo bool
}

// SkippedError prefixes the Skipped reason of value sets recorded as an
// error, before the error's text.
const SkippedError = "error: "

// Stats counts what a backfill read and wrote. Read = Written + Rejected +
// Unsent + Unanswered.
type Stats struct {
	Read     int64 // samples produced from the archives
	Written  int64 // samples the sink accepted (the receiver acknowledged)
	Rejected int64 // samples the sink refused (reported, never silent)
	// Unsent counts samples read and not sent: after the run stopped (an
	// error, SIGINT), or sent only in requests the receiver answered
	// without storing them (5xx, 429) before the run stopped.
	Unsent int64
	// Unanswered counts samples sent without an answer when the run
	// stopped: the receiver may hold them (Outcome.Unanswered).
	Unanswered int64
	// Duplicated counts samples written that were sent again after a lost
	// answer: the receiver may hold them twice (Outcome.Duplicated).
	Duplicated int64
	// RejectedBy counts the rejected samples by reason.
	RejectedBy map[string]int64
	// Skipped counts what was not turned into samples, by reason: metrics
	// the mapping skips ("metric_" and the mapping.SkipReason: aggregate,
	// event, excluded, name_clash, ...) and value sets the archive records
	// as a PCP error instead of values ("error: " and the error's text, as
	// pmdumplog prints it).
	Skipped  map[string]int64
	Series   int
	First    time.Time
	Last     time.Time
	Progress time.Time // time of the last sample handled
	Errors   []string  // first rejection of each reason, at most 10
}

const batchSize = 4096

// Run backfills opts.Archives into sink. Archives whose time ranges do not
// overlap are one timeline; archives of different hosts should be given in
// separate runs (or they are read one after the other, which sinks that
// need time order, TSDB blocks, handle per 2 h window).
func Run(ctx context.Context, opts Options, sink Sink) (Stats, error) {
	st := Stats{Skipped: map[string]int64{}, RejectedBy: map[string]int64{}}
	if err := checkLabels(opts.Labels); err != nil {
		return st, err
	}
	if len(opts.Archives) == 0 {
		return st, errors.New("backfill: no archive")
	}
	if opts.Mapper == nil {
		m, err := mapping.New(nil, mapping.Options{})
		if err != nil {
			return st, err
		}
		opts.Mapper = m
	}
	if _, ok := sink.(*OTLPSink); ok {
		opts.NoTargetInfo = true // the resource carries the target labels
		// the instruments, units and values of the live push (one mapping)
		opts.Mapper = opts.Mapper.OTel()
	}
	if opts.Mapper.Naming().Computed() && opts.Step <= 0 {
		// its families combine metrics that records may hold at different times
		return st, fmt.Errorf("the %s naming needs --step (interpolated samples): its families are computed from several PCP metrics at one time", opts.Mapper.Naming())
	}
	_, otel := sink.(*OTLPSink)
	r := &run{opts: opts, otel: otel, st: &st, byLabels: map[string]*Series{}, w: startWriter(ctx, sink, opts.FailFast)}
	for _, a := range opts.Archives {
		r.targets = append(r.targets, opts.Mapper.TargetLabels(a.Metrics(), nil))
	}
	var err error
	if opts.Step > 0 {
		err = r.step(ctx)
	} else {
		err = r.raw(ctx)
	}
	if ferr := r.flush(); err == nil {
		err = ferr
	}
	if werr := r.w.finish(&st); err == nil {
		err = werr
	}
	st.Series = len(r.byLabels)
	st.Unsent = st.Read - st.Written - st.Rejected - st.Unanswered
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	return st, err
}

// writer calls the sink in a goroutine of its own, batch after batch in
// order, so that reading and interpolating the archives overlaps with
// encoding and sending the samples. At most writerDepth batches wait.
type writer struct {
	ctx                    context.Context
	sink                   Sink
	failFast               bool
	jobs                   chan []Sample
	free                   chan []Sample
	done                   chan struct{}
	written                atomic.Int64
	rejected               atomic.Int64
	unanswered, duplicated atomic.Int64
	mu                     sync.Mutex
	by                     map[string]int64
	errs                   []string // the first rejection of each reason
	err                    error    // the sink failed: no batch is written after it
}

const writerDepth = 2

func startWriter(ctx context.Context, sink Sink, failFast bool) *writer {
	w := &writer{ctx: ctx, sink: sink, failFast: failFast, by: map[string]int64{},
		jobs: make(chan []Sample, writerDepth), free: make(chan []Sample, writerDepth+1), done: make(chan struct{})}
	go w.loop()
	return w
}

func (w *writer) loop() {
	defer close(w.done)
	for batch := range w.jobs {
		if w.failed() == nil && w.ctx.Err() == nil {
			out, err := w.sink.Write(w.ctx, batch)
			w.account(out, err)
		}
		w.free <- batch[:0]
	}
}

// account adds a batch's outcome.
func (w *writer) account(out Outcome, err error) {
	w.written.Add(int64(out.Accepted))
	w.rejected.Add(int64(out.rejected()))
	w.unanswered.Add(int64(out.Unanswered))
	w.duplicated.Add(int64(out.Duplicated))
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range out.Rejected {
		if r.N == 0 {
			continue
		}
		if w.by[r.Reason] == 0 && len(w.errs) < 10 {
			w.errs = append(w.errs, r.Detail)
		}
		w.by[r.Reason] += int64(r.N)
		if w.failFast && err == nil {
			err = fmt.Errorf("%d samples rejected (--fail-fast): %s", r.N, r.Detail)
		}
	}
	if err != nil && w.err == nil {
		w.err = err
	}
}

func (w *writer) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// send queues a full batch and returns an empty one to fill.
func (w *writer) send(batch []Sample) []Sample {
	w.jobs <- batch
	select {
	case b := <-w.free:
		return b
	default:
		return make([]Sample, 0, batchSize)
	}
}

// finish waits for the queued batches and adds what the sink did to st.
func (w *writer) finish(st *Stats) error {
	close(w.jobs)
	<-w.done
	w.count(st)
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, v := range w.by {
		st.RejectedBy[k] += v
	}
	st.Errors = append(st.Errors, w.errs...)
	return w.err
}

func (w *writer) count(st *Stats) {
	st.Written, st.Rejected = w.written.Load(), w.rejected.Load()
	st.Unanswered, st.Duplicated = w.unanswered.Load(), w.duplicated.Load()
}

type run struct {
	opts  Options
	otel  bool // for the OTLP sink: values as the live push converts them
	w     *writer
	st    *Stats
	batch []Sample
	// series finds the series of a (family, instance) of the current source
	// (an archive in raw mode); byLabels every series of the run, by its
	// labels: archives of other metrics, or whose instance ids name other
	// instances, still write each series under one *Series.
	series   map[seriesKey]*Series
	hints    [][]seriesHint // by family of the current source, value position
	byLabels map[string]*Series
	// targets are the archives' target labels (the labels that tell them
	// apart stay on the series); resource is the current source's
	// OpenTelemetry resource; info its target_info series (nil: none),
	// written at infoT, the newest sample time so far in milliseconds, and
	// at every later one (never twice in one millisecond: raw samples need
	// not come in order, and several may share a millisecond).
	targets  [][]mapping.LabelPair
	resource []mapping.LabelPair
	info     *Series
	infoT    int64 // milliseconds
	// counter starts by Series.ID, with the read (step) in which each
	// series last had a value: see start
	starts   []bridge.CounterStart
	lastRead []int64
	reads    int64
}

// source starts the samples of a source (an archive in raw mode, the
// replay in step mode) of these metrics and target labels: its resource
// and target_info series, and the metrics its mapping skipped.
func (r *run) source(metrics []source.Metric, target []mapping.LabelPair, skipped []mapping.Skipped) {
	r.resource = r.opts.Mapper.Resource(metrics, target)
	r.info, r.infoT = nil, math.MinInt64
	if r.opts.Mapper.Lean() && !r.opts.NoTargetInfo && len(target) > 0 && r.keeps(mapping.TargetInfoName) {
		r.info = r.seriesOf(append([]mapping.LabelPair{{Name: "__name__", Value: mapping.TargetInfoName}}, target...), mapping.TargetInfo(), nil)
	}
	for _, s := range skipped {
		r.st.Skipped["metric_"+string(s.Reason)]++
	}
	r.series = map[seriesKey]*Series{}
	r.hints = r.hints[:0]
}

// keeps reports whether the run writes the family of this name.
func (r *run) keeps(name string) bool {
	return r.opts.Families == nil || r.opts.Families[name]
}

// seriesKey identifies a series of a run: family, instance (its id and its
// name at the sample's time: a renamed instance is another series), and for
// info metrics the string value (a label).
type seriesKey struct {
	fam  *mapping.Family
	inst int32
	name string
	info string
}

// lookup returns the series of family f (of the current source) for
// instance in (nil: singular) and, for an info family, string value,
// making it on first use; series with the same labels are one, whatever
// the source.
func (r *run) lookup(f *mapping.Family, in *source.Instance, info string) *Series {
	k := seriesKey{fam: f, info: info}
	if in != nil {
		k.inst, k.name = in.ID, in.Name
	}
	if s := r.series[k]; s != nil {
		return s
	}
	ls := append([]mapping.LabelPair{{Name: "__name__", Value: f.Name}}, f.Labels(in)...)
	attrs := f.Attributes(in)
	if f.Type == mapping.Info {
		ls = append(ls, mapping.LabelPair{Name: mapping.InfoValueLabel, Value: info})
		attrs = append(attrs, mapping.LabelPair{Name: mapping.InfoValueLabel, Value: info})
	}
	s := r.seriesOf(ls, f, attrs)
	r.series[k] = s
	return s
}

// seriesOf returns the series of a label set (sorted here), making it on
// first use: series with the same labels are one, whatever the source.
func (r *run) seriesOf(ls []mapping.LabelPair, f *mapping.Family, attrs []mapping.LabelPair) *Series {
	ls = withLabels(ls, r.opts.Labels)
	attrs = withLabels(attrs, r.opts.Labels)
	sort.Slice(ls, func(i, j int) bool { return ls[i].Name < ls[j].Name })
	key := bridge.ResourceKey(ls)
	s := r.byLabels[key]
	if s == nil {
		s = &Series{Labels: ls, Family: f, Resource: r.resource, Attrs: attrs, ID: len(r.byLabels)}
		r.byLabels[key] = s
	}
	return s
}

// seriesHint is the series last written at a value position of a family:
// sets list their instances in the same order time after time, so it is
// tried first. It holds while the family and the instance (id, and
// generation of the instance names in raw mode, name in step mode) are the
// same.
type seriesHint struct {
	fam  *mapping.Family
	inst int32
	gen  uint64 // of the instance names (source.InstanceNames.Gen)
	name string
	s    *Series
}

// hintsOf returns the hints of family fi's first n value positions.
func (r *run) hintsOf(fi, n int) []seriesHint {
	if len(r.hints) <= fi {
		r.hints = append(r.hints, make([][]seriesHint, fi+1-len(r.hints))...)
	}
	if len(r.hints[fi]) < n {
		r.hints[fi] = append(r.hints[fi], make([]seriesHint, n-len(r.hints[fi]))...)
	}
	return r.hints[fi][:n]
}

// value is a PCP value in family f's unit, as the output gives it: as the
// live push converts it for the OTLP sink, 1 for an info metric.
func (r *run) value(f *mapping.Family, v semantics.Value) float64 {
	switch {
	case f.Type == mapping.Info:
		return 1
	case r.otel:
		return f.OTelValue(v) // the live push's conversion
	}
	return f.PrometheusValue(v) // the scrape's
}

// sample writes value val of series s at t; gen is the generation of a
// counter's values (see start).
func (r *run) sample(s *Series, val float64, t, gen time.Time) error {
	r.st.Read++
	if r.st.First.IsZero() || t.Before(r.st.First) {
		r.st.First = t
	}
	if t.After(r.st.Last) {
		r.st.Last = t
	}
	r.st.Progress = t
	ms := t.UnixMilli()
	if r.info != nil && ms > r.infoT {
		r.infoT = ms
		r.st.Read++
		r.batch = append(r.batch, Sample{Series: r.info, T: ms, V: 1})
	}
	r.batch = append(r.batch, Sample{Series: s, T: ms, V: val, Start: r.start(s, val, t, gen)})
	if len(r.batch) >= batchSize {
		return r.flush()
	}
	return nil
}

// start returns a counter series' start after its value v at t (0 for
// other series): bridge.CounterStart, the rule of /metrics and the OTLP
// push, with gen as the generation. As in the push, a series goes on
// (continued) when it had a value at the previous read (in step mode, one
// step before); in raw mode always, as its values come in records of their
// own times (a <mark> makes a new generation, a value that goes down a
// reset).
func (r *run) start(s *Series, v float64, t, gen time.Time) int64 {
	if s.Family.Type != mapping.Counter {
		return 0
	}
	for len(r.starts) <= s.ID {
		r.starts = append(r.starts, bridge.CounterStart{})
		r.lastRead = append(r.lastRead, math.MinInt64)
	}
	continued := r.opts.Step <= 0 || r.lastRead[s.ID] == r.reads-1
	r.lastRead[s.ID] = r.reads
	return r.starts[s.ID].Observe(v, t, gen, continued).UnixNano()
}

// flush hands the batch to the writer; it returns the sink's error once
// the sink failed (the samples read after it are not written: Run returns
// the error).
func (r *run) flush() error {
	if len(r.batch) == 0 {
		return nil
	}
	if err := r.w.failed(); err != nil {
		return err
	}
	if err := r.w.ctx.Err(); err != nil {
		return err
	}
	r.batch = r.w.send(r.batch)
	if r.opts.Progress != nil {
		r.w.count(r.st)
		r.opts.Progress(*r.st)
	}
	return nil
}

func (r *run) inRange(t time.Time) bool {
	if !r.opts.Start.IsZero() && t.Before(r.opts.Start) {
		return false
	}
	if !r.opts.Finish.IsZero() && t.After(r.opts.Finish) {
		return false
	}
	return true
}

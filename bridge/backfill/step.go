package backfill

import (
	"context"
	"errors"
	"strings"

	"github.com/pcp-exporter/pcp-exporter/bridge"
	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/archive"
)

// step writes interpolated values at every multiple of the step. Each
// grid time is one read of a bridge.Collector over the archives' replay:
// the reading of a scrape and of the OTLP push (the mapped families, each
// value's instance named as at that time, the epoch retry, the counters'
// generations), which step only encodes into samples.
func (r *run) step(ctx context.Context) error {
	rp, err := archive.NewReplay(r.opts.Archives, archive.ReplayOptions{Interp: r.opts.Interp})
	if err != nil {
		return err
	}
	defer rp.Close() // stops its reading goroutine
	var src source.Source = rp
	if r.opts.Wrap != nil {
		if src, err = r.opts.Wrap(src); err != nil {
			return err
		}
	}
	col := bridge.New(r.opts.Mapper, nil, bridge.Source{Name: "archive replay", Src: src})
	col.SetReadOptions(bridge.ReadOptions{
		Keep:      func(f *mapping.Family) bool { return r.keeps(f.Name) },
		Namespace: r.targets,
	})
	m := col.Mapped(0, false)
	r.source(m.Metrics, m.Target, m.Skipped)
	end, err := rp.End()
	if err != nil {
		return err
	}
	if !r.opts.Finish.IsZero() && r.opts.Finish.Before(end) {
		end = r.opts.Finish
	}
	start := rp.Start()
	if !r.opts.Start.IsZero() && r.opts.Start.After(start) {
		start = r.opts.Start
	}
	step := r.opts.Step
	t := start.Truncate(step)
	if t.Before(start) {
		t = t.Add(step)
	}
	var failed error // the first sample the sink could not take
	value := func(v *bridge.Value) {
		if failed == nil {
			failed = r.stepValue(v)
		}
	}
	skip := func(f *bridge.Failed) { r.st.Skipped[SkippedError+f.Err.Error()]++ }
	for ; !t.After(end); t = t.Add(step) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := col.ReadAt(t, false, value, skip); err != nil {
			if errors.Is(err, semantics.ErrEOL) {
				break
			}
			return err
		}
		if failed != nil {
			return failed
		}
		r.reads++
	}
	return nil
}

// stepValue writes one value of a step's read. A value position of a
// family keeps its series while the instance id and name are the same.
func (r *run) stepValue(v *bridge.Value) error {
	f := v.Family
	var s *Series
	if f.Type == mapping.Info {
		s = r.lookup(f, v.Inst, strings.ToValidUTF8(v.IV.Value.Str(), "\uFFFD"))
	} else {
		name := ""
		if v.Inst != nil {
			name = v.Inst.Name
		}
		h := &r.hintsOf(v.Index, v.Pos+1)[v.Pos]
		if h.s == nil || h.fam != f || h.inst != v.IV.Inst || h.name != name {
			*h = seriesHint{fam: f, inst: v.IV.Inst, name: name, s: r.lookup(f, v.Inst, "")}
		}
		s = h.s
	}
	return r.sample(s, r.value(f, v.IV.Value), v.T, v.Gen)
}

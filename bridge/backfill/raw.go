package backfill

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

// rawSource is what raw mode knows of the archive it reads: the families
// of its metrics (the run's), by PMID, and its instances' names.
type rawSource struct {
	fams   []*mapping.Family
	byPMID map[semantics.PMID][]int
	names  *source.InstanceNames
	gen    time.Time // the run start of the values read now (<mark>s)
}

// raw writes every recorded value, archive after archive in time order.
// It reads the archives' records, not the bridge's Collector: a record
// holds the values of some metrics at its own time, and raw samples keep
// every record's time and values as recorded, where the Collector reads
// every metric at times the caller chooses (interpolated, in step mode).
// What it shares with that reading: the mapping (Mapper.MapSource in the
// run's namespace, the run's families: ReadOptions' Keep and Namespace in
// step mode), the instances named as at each record's time, and the
// counter starts (bridge.CounterStart, each <mark> a new generation).
func (r *run) raw(ctx context.Context) error {
	as := append([]*pcplog.Archive(nil), r.opts.Archives...)
	sort.SliceStable(as, func(i, j int) bool { return as[i].Label().Start.Before(as[j].Label().Start) })
	for _, a := range as {
		src := r.rawSource(a)
		var rd *pcplog.Reader
		if !r.opts.Start.IsZero() {
			rd = a.RecordsFrom(r.opts.Start)
		} else {
			rd = a.Records()
		}
		rd.Only(func(p semantics.PMID) bool { _, ok := src.byPMID[p]; return ok })
		// the run in force where the reading starts (a <mark> before
		// --start included), then each <mark> read
		from := a.Label().Start
		if r.opts.Start.After(from) {
			from = r.opts.Start
		}
		src.gen = pcplog.RunStart([]*pcplog.Archive{a}, from)
		err := r.records(ctx, rd, src)
		if rerr := rd.Err(); err == nil {
			err = rerr
		}
		rd.Close()
		if err != nil {
			return err
		}
		if err := r.flush(); err != nil {
			return err
		}
	}
	return nil
}

// rawSource maps an archive's metrics as step mode's Collector does.
func (r *run) rawSource(a *pcplog.Archive) *rawSource {
	metrics := a.Metrics()
	target := r.opts.Mapper.TargetLabels(metrics, nil)
	fams, skipped := r.opts.Mapper.MapSource(metrics, target, mapping.NewNamespace(r.targets...))
	r.source(metrics, target, skipped)
	src := &rawSource{byPMID: map[semantics.PMID][]int{}, names: source.NewInstanceNames(a)}
	for i := range fams {
		f := &fams[i]
		if !r.keeps(f.Name) {
			continue
		}
		src.fams = append(src.fams, f)
		src.byPMID[f.Desc.PMID] = append(src.byPMID[f.Desc.PMID], len(src.fams)-1)
	}
	return src
}

// records writes the values of the records rd reads.
func (r *run) records(ctx context.Context, rd *pcplog.Reader, src *rawSource) error {
	n := 0
	for rd.Next() {
		if n++; n%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		rec := rd.Record()
		if rec.Mark {
			src.gen = rec.Time
		}
		if rec.Mark || !r.inRange(rec.Time) {
			if !r.opts.Finish.IsZero() && rec.Time.After(r.opts.Finish) {
				return nil
			}
			continue
		}
		for _, set := range rec.Sets {
			fis, ok := src.byPMID[set.PMID]
			if !ok {
				continue
			}
			if set.Err != nil {
				r.st.Skipped[SkippedError+set.Err.Error()] += int64(len(fis))
				continue
			}
			for _, fi := range fis {
				if err := r.rawSet(src, fi, set.Values, rec.Time); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// rawSet writes the values of family fi recorded at t.
func (r *run) rawSet(src *rawSource, fi int, vals []source.InstValue, t time.Time) error {
	f := src.fams[fi]
	var gen uint64
	if f.Desc.InDom != semantics.InDomNull {
		gen = src.names.Gen(f.Desc.InDom, t)
	}
	instance := func(id int32) *source.Instance {
		if f.Desc.InDom == semantics.InDomNull {
			return nil
		}
		in, _ := src.names.Lookup(f.Desc.InDom, id, t)
		return in
	}
	var hints []seriesHint
	if f.Type != mapping.Info {
		hints = r.hintsOf(fi, len(vals))
	}
	for j, iv := range vals {
		var s *Series
		if f.Type == mapping.Info {
			s = r.lookup(f, instance(iv.Inst), strings.ToValidUTF8(iv.Value.Str(), "\uFFFD"))
		} else {
			h := &hints[j]
			if h.s == nil || h.inst != iv.Inst || h.gen != gen {
				*h = seriesHint{inst: iv.Inst, gen: gen, s: r.lookup(f, instance(iv.Inst), "")}
			}
			s = h.s
		}
		if err := r.sample(s, r.value(f, iv.Value), t, src.gen); err != nil {
			return err
		}
	}
	return nil
}

package backfill

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pcp-exporter/pcp-exporter/bridge"
	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/archive"
)

// familiesPerPass is how many metric families one pass over the archives
// writes; each has a temporary file, so that the OpenMetrics output keeps
// every family's samples together (as the format requires) with bounded
// memory.
const familiesPerPass = 64

// omTempPrefix starts the names of the temporary files, followed by the
// writing process's id.
const omTempPrefix = ".pcp-exporter-om-"

// WriteOpenMetrics writes the samples as an OpenMetrics text file that
// `promtool tsdb create-blocks-from openmetrics` accepts: families one after
// the other (HELP, TYPE and UNIT first), timestamps in seconds, "# EOF"
// last; with created, a _created sample after each counter sample (see
// bridge.Format: promtool stores them as series of their own). The
// temporary files go to opts.TempDir (the output's directory, for the
// command), where those a killed run left are removed.
func WriteOpenMetrics(ctx context.Context, opts Options, w io.Writer, created bool) (Stats, error) {
	total := Stats{Skipped: map[string]int64{}, RejectedBy: map[string]int64{}}
	removeStaleTemps(opts.TempDir)
	names, err := familyNames(opts)
	if err != nil {
		return total, err
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	for i := 0; i < len(names); i += familiesPerPass {
		group := names[i:min(i+familiesPerPass, len(names))]
		sink, err := newOMSink(opts.TempDir, group, created)
		if err != nil {
			return total, err
		}
		o := opts
		o.Families = map[string]bool{}
		for _, n := range group {
			o.Families[n] = true
		}
		st, err := Run(ctx, o, sink)
		if err == nil {
			err = sink.copyTo(bw)
		}
		sink.remove()
		total.Read += st.Read
		total.Written += st.Written
		total.Rejected += st.Rejected
		total.Unsent += st.Unsent
		for k, v := range st.RejectedBy {
			total.RejectedBy[k] += v
		}
		total.Errors = append(total.Errors, st.Errors...)
		total.Series += st.Series
		for k, v := range st.Skipped {
			if i == 0 || !strings.HasPrefix(k, "metric_") {
				total.Skipped[k] += v
			}
		}
		if !st.First.IsZero() && (total.First.IsZero() || st.First.Before(total.First)) {
			total.First = st.First
		}
		if st.Last.After(total.Last) {
			total.Last = st.Last
		}
		if err != nil {
			return total, err
		}
	}
	if _, err := bw.WriteString("# EOF\n"); err != nil {
		return total, err
	}
	return total, bw.Flush()
}

// familyNames lists the family names a backfill with opts produces.
func familyNames(opts Options) ([]string, error) {
	var metrics []source.Metric
	if opts.Step > 0 && (opts.Wrap != nil || opts.Mapper != nil && opts.Mapper.Naming().Computed()) {
		rp, err := archive.NewReplay(opts.Archives, archive.ReplayOptions{})
		if err != nil {
			return nil, err
		}
		defer rp.Close()
		var src source.Source = rp
		if opts.Wrap != nil {
			if src, err = opts.Wrap(rp); err != nil {
				return nil, err
			}
		}
		if opts.Mapper != nil {
			src = opts.Mapper.Wrap(src)
		}
		metrics = src.Metrics()
	} else {
		seen := map[string]bool{}
		for _, a := range opts.Archives {
			for _, m := range a.Metrics() {
				if !seen[m.Name] {
					seen[m.Name] = true
					metrics = append(metrics, m)
				}
			}
		}
		sort.Slice(metrics, func(i, j int) bool { return metrics[i].Name < metrics[j].Name })
	}
	m := opts.Mapper
	if m == nil {
		var err error
		if m, err = mapping.New(nil, mapping.Options{}); err != nil {
			return nil, err
		}
	}
	fams, _ := m.MapAll(metrics, nil)
	names := make([]string, 0, len(fams))
	for _, f := range fams {
		names = append(names, f.Name)
	}
	if m.Lean() {
		names = append(names, mapping.TargetInfoName)
	}
	return names, nil
}

type omSink struct {
	created bool
	names   []string
	files   map[string]*os.File
	bufs    map[string]*bufio.Writer
	head    map[string]bool
	line    []byte
	series  []omSeries // by Series.ID
}

// omSeries is what the sink keeps per series: its label block, and the
// start of a counter (Sample.Start) with its rendered value (createdV).
type omSeries struct {
	labels   []byte
	created  int64
	createdV []byte
}

// removeStaleTemps removes the temporary files of writers in dir that no
// longer run (killed before they could remove them).
func removeStaleTemps(dir string) {
	if dir == "" {
		return
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), omTempPrefix)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		pid, _, _ := strings.Cut(rest, "-")
		n, err := strconv.Atoi(pid)
		if err != nil || n <= 0 || n != os.Getpid() && syscall.Kill(n, 0) != syscall.ESRCH {
			continue // not ours, or its writer still runs
		}
		os.Remove(filepath.Join(dir, e.Name()))
	}
}

func newOMSink(dir string, names []string, created bool) (*omSink, error) {
	s := &omSink{created: created, names: names, files: map[string]*os.File{}, bufs: map[string]*bufio.Writer{}, head: map[string]bool{}}
	for _, n := range names {
		f, err := os.CreateTemp(dir, fmt.Sprintf("%s%d-", omTempPrefix, os.Getpid()))
		if err != nil {
			s.remove()
			return nil, err
		}
		s.files[n] = f
		s.bufs[n] = bufio.NewWriterSize(f, 8192)
	}
	return s, nil
}

// Write appends each sample to its family's file, as the exposition of
// /metrics in OpenMetrics writes it (bridge's encoder: HELP, TYPE and UNIT
// first, info families typed info), with its timestamp in seconds, and a
// _created sample after every counter sample if asked for.
func (s *omSink) Write(_ context.Context, batch []Sample) (Outcome, error) {
	for i := range batch {
		smp := &batch[i]
		f := smp.Series.Family
		w := s.bufs[f.Name]
		if w == nil {
			continue
		}
		b := s.line[:0]
		if !s.head[f.Name] {
			s.head[f.Name] = true
			b = bridge.AppendHeader(b, f, true)
		}
		for len(s.series) <= smp.Series.ID {
			s.series = append(s.series, omSeries{})
		}
		ser := &s.series[smp.Series.ID]
		if ser.labels == nil {
			ser.labels = bridge.AppendLabels(nil, seriesLabels(smp.Series.Labels), "")
		}
		b = append(b, f.Name...)
		b = append(b, ser.labels...)
		b = bridge.AppendFloat(b, smp.V, true)
		b = append(b, ' ')
		n := len(b)
		b = strconv.AppendFloat(b, float64(smp.T)/1000, 'f', -1, 64)
		ts := b[n:]
		b = append(b, '\n')
		if s.created && bridge.HasCreated(f) {
			if ser.createdV == nil || smp.Start != ser.created {
				ser.created = smp.Start
				ser.createdV = bridge.AppendStart(ser.createdV[:0], time.Unix(0, smp.Start))
			}
			b = bridge.AppendCreated(b, f, ser.labels, ser.createdV)
			b = append(b, ' ')
			b = append(b, ts...)
			b = append(b, '\n')
		}
		s.line = b
		if _, err := w.Write(b); err != nil {
			return Outcome{Accepted: i}, err
		}
	}
	return Outcome{Accepted: len(batch)}, nil
}

// seriesLabels returns labels without __name__ (sorted, as Series has them).
func seriesLabels(ls []mapping.LabelPair) []mapping.LabelPair {
	for i, l := range ls {
		if l.Name == "__name__" {
			return append(ls[:i:i], ls[i+1:]...)
		}
	}
	return ls
}

func (s *omSink) Close() error { return nil }

func (s *omSink) copyTo(w io.Writer) error {
	for _, n := range s.names {
		if err := s.bufs[n].Flush(); err != nil {
			return err
		}
		f := s.files[n]
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		if _, err := io.Copy(w, f); err != nil {
			return fmt.Errorf("openmetrics: %w", err)
		}
	}
	return nil
}

func (s *omSink) remove() {
	for _, f := range s.files {
		f.Close()
		os.Remove(f.Name())
	}
}

package backfill

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/archive"
)

// familiesPerPass is how many metric families one pass over the archives
// writes; each has a temporary file, so that the OpenMetrics output keeps
// every family's samples together (as the format requires) with bounded
// memory.
const familiesPerPass = 64

// WriteOpenMetrics writes the samples as an OpenMetrics text file that
// `promtool tsdb create-blocks-from openmetrics` accepts: families one after
// the other (TYPE and HELP first), timestamps in seconds, "# EOF" last.
func WriteOpenMetrics(ctx context.Context, opts Options, w io.Writer) (Stats, error) {
	total := Stats{Skipped: map[string]int64{}}
	names, err := familyNames(opts)
	if err != nil {
		return total, err
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	for i := 0; i < len(names); i += familiesPerPass {
		group := names[i:min(i+familiesPerPass, len(names))]
		sink, err := newOMSink(group)
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
	if opts.Step > 0 && opts.Wrap != nil {
		rp, err := archive.NewReplay(opts.Archives, archive.ReplayOptions{})
		if err != nil {
			return nil, err
		}
		defer rp.Close()
		src, err := opts.Wrap(rp)
		if err != nil {
			return nil, err
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
	names []string
	files map[string]*os.File
	bufs  map[string]*bufio.Writer
	head  map[string]bool
	line  []byte
}

func newOMSink(names []string) (*omSink, error) {
	s := &omSink{names: names, files: map[string]*os.File{}, bufs: map[string]*bufio.Writer{}, head: map[string]bool{}}
	for _, n := range names {
		f, err := os.CreateTemp("", "pcp-exporter-om-")
		if err != nil {
			s.remove()
			return nil, err
		}
		s.files[n] = f
		s.bufs[n] = bufio.NewWriterSize(f, 8192)
	}
	return s, nil
}

func (s *omSink) Write(batch []Sample) (int, error) {
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
			typ := "gauge"
			om := f.OMName
			switch f.Type {
			case mapping.Counter:
				typ = "counter"
			case mapping.Info:
				om = f.Name // an info family kept as a gauge named ..._info
			}
			b = append(b, "# TYPE "...)
			b = append(b, om...)
			b = append(b, ' ')
			b = append(b, typ...)
			b = append(b, '\n')
			if f.Help != "" {
				b = append(b, "# HELP "...)
				b = append(b, om...)
				b = append(b, ' ')
				b = appendEscaped(b, f.Help, false)
				b = append(b, '\n')
			}
		}
		b = append(b, f.Name...)
		first := true
		for _, l := range smp.Series.Labels {
			if l.Name == "__name__" {
				continue
			}
			if first {
				b = append(b, '{')
				first = false
			} else {
				b = append(b, ',')
			}
			b = append(b, l.Name...)
			b = append(b, `="`...)
			b = appendEscaped(b, l.Value, true)
			b = append(b, '"')
		}
		if !first {
			b = append(b, '}')
		}
		b = append(b, ' ')
		b = strconv.AppendFloat(b, smp.V, 'g', -1, 64)
		b = append(b, ' ')
		b = strconv.AppendFloat(b, float64(smp.T)/1000, 'f', -1, 64)
		b = append(b, '\n')
		s.line = b
		if _, err := w.Write(b); err != nil {
			return 0, err
		}
	}
	return 0, nil
}

// appendEscaped escapes a label value (quote) or HELP text as OpenMetrics
// requires: backslash, newline, and double quote in label values.
func appendEscaped(b []byte, s string, quote bool) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, `\\`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '"' && quote:
			b = append(b, `\"`...)
		default:
			b = append(b, c)
		}
	}
	return b
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

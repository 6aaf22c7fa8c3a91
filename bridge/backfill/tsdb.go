package backfill

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"
)

// blockRange is the time range of the blocks written: Prometheus's default
// (2 h), aligned, as promtool's backfill writes them.
const blockRange = 2 * time.Hour

// maxSamplesInAppender bounds the samples held before a commit.
const maxSamplesInAppender = 5000

// TSDBSink writes samples into Prometheus TSDB blocks in a directory (one
// block per aligned 2 h window that has samples), ready to be moved into a
// Prometheus data directory. Samples must come in time order.
type TSDBSink struct {
	dir     string
	logger  *slog.Logger
	w       *tsdb.BlockWriter
	app     storage.Appender
	ctx     context.Context
	window  int64 // start (ms) of the current block window
	pending int
	blocks  int
	b       labels.ScratchBuilder
	// per series, by Series.ID: the reference in the current block
	// writer (0: none yet) and the label set
	refs  []storage.SeriesRef
	lsets []labels.Labels
}

// NewTSDBSink writes blocks into dir (created if needed).
func NewTSDBSink(dir string, logger *slog.Logger) *TSDBSink {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &TSDBSink{dir: dir, logger: logger, ctx: context.Background(), window: -1}
}

// Write appends samples; it returns how many were rejected by the TSDB (out
// of order or duplicate timestamps of a series), with the first error.
func (s *TSDBSink) Write(batch []Sample) (rejected int, err error) {
	rangeMs := blockRange.Milliseconds()
	var first error
	for i := range batch {
		smp := &batch[i]
		win := smp.T - smp.T%rangeMs
		if smp.T < 0 && smp.T%rangeMs != 0 {
			win -= rangeMs
		}
		if win != s.window {
			if err := s.flush(); err != nil {
				return rejected, err
			}
			w, err := tsdb.NewBlockWriter(s.logger, s.dir, 2*rangeMs)
			if err != nil {
				return rejected, fmt.Errorf("tsdb: %w", err)
			}
			s.w, s.window = w, win
			s.app = w.Appender(s.ctx)
			clear(s.refs)
		}
		id := smp.Series.ID
		if id >= len(s.lsets) {
			n := max(id+1, 2*len(s.lsets))
			s.lsets = append(s.lsets, make([]labels.Labels, n-len(s.lsets))...)
			s.refs = append(s.refs, make([]storage.SeriesRef, n-len(s.refs))...)
		}
		lset := s.lsets[id]
		if lset.IsEmpty() {
			s.b.Reset()
			for _, l := range smp.Series.Labels {
				s.b.Add(l.Name, l.Value)
			}
			s.b.Sort()
			lset = s.b.Labels()
			s.lsets[id] = lset
		}
		ref, err := s.app.Append(s.refs[id], lset, smp.T, smp.V)
		if err != nil {
			rejected++
			if first == nil {
				first = fmt.Errorf("%s at %d: %w", lset.String(), smp.T, err)
			}
			continue
		}
		s.refs[id] = ref
		s.pending++
		if s.pending >= maxSamplesInAppender {
			if err := s.app.Commit(); err != nil {
				return rejected, fmt.Errorf("tsdb: commit: %w", err)
			}
			s.app = s.w.Appender(s.ctx)
			s.pending = 0
		}
	}
	return rejected, first
}

func (s *TSDBSink) flush() error {
	if s.w == nil {
		return nil
	}
	defer func() {
		s.w.Close()
		s.w = nil
	}()
	if err := s.app.Commit(); err != nil {
		return fmt.Errorf("tsdb: commit: %w", err)
	}
	s.pending = 0
	id, err := s.w.Flush(s.ctx)
	if err != nil {
		return fmt.Errorf("tsdb: writing a block: %w", err)
	}
	s.blocks++
	s.logger.Debug("block written", "ulid", id.String(), "window", time.UnixMilli(s.window).UTC())
	return nil
}

// Close writes the last block.
func (s *TSDBSink) Close() error { return s.flush() }

// Blocks returns the number of blocks written.
func (s *TSDBSink) Blocks() int { return s.blocks }

package backfill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
)

// blockRange is the time range of the blocks written: Prometheus's default
// (2 h), aligned, as promtool's backfill writes them.
const blockRange = 2 * time.Hour

// TSDBSink writes samples into Prometheus TSDB blocks in a directory (one
// block per aligned 2 h window that has samples), ready to be moved into a
// Prometheus data directory. Samples must come in time order. The blocks are
// those tsdb.BlockWriter writes (see blockWriter), without linking package
// tsdb.
type TSDBSink struct {
	dir    string
	logger *slog.Logger
	w      *blockWriter // of the current window; nil before the first sample
	window int64        // start (ms) of the current block window
	blocks int
	b      labels.ScratchBuilder
	// per series, by Series.ID: the series in the current block (nil:
	// none yet) and the label set
	cur   []*blockSeries
	lsets []labels.Labels
}

// NewTSDBSink writes blocks into dir (created if needed). The blocks a
// killed run left half-written there are removed, as Prometheus removes
// them when it opens its data directory.
func NewTSDBSink(dir string, logger *slog.Logger) *TSDBSink {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if tmps, _ := filepath.Glob(filepath.Join(dir, "*"+tmpForCreation)); len(tmps) > 0 {
		for _, t := range tmps {
			if err := os.RemoveAll(t); err != nil {
				logger.Warn("removing a block a killed run left", "dir", t, "err", err)
			}
		}
	}
	return &TSDBSink{dir: dir, logger: logger, window: -1}
}

// Write appends samples; it rejects those the TSDB head refuses (older
// than the series' last sample, or at its timestamp with another value).
// The samples are accepted into the block being filled, which is written
// when the next window starts or at Close.
func (s *TSDBSink) Write(_ context.Context, batch []Sample) (out Outcome, err error) {
	rangeMs := blockRange.Milliseconds()
	byReason := map[string]int{}
	for i := range batch {
		smp := &batch[i]
		win := smp.T - smp.T%rangeMs
		if smp.T < 0 && smp.T%rangeMs != 0 {
			win -= rangeMs
		}
		if win != s.window || s.w == nil {
			if err := s.flush(); err != nil {
				return out, err
			}
			// The BlockWriter's head has twice the block range as
			// chunk range.
			s.w, s.window = newBlockWriter(2*rangeMs), win
			clear(s.cur)
		}
		id := smp.Series.ID
		if id >= len(s.lsets) {
			n := max(id+1, 2*len(s.lsets))
			s.lsets = append(s.lsets, make([]labels.Labels, n-len(s.lsets))...)
			s.cur = append(s.cur, make([]*blockSeries, n-len(s.cur))...)
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
		ser := s.cur[id]
		if ser == nil {
			ser, err = s.w.seriesFor(lset)
		}
		if err == nil {
			s.cur[id] = ser
			err = s.w.append(ser, smp.T, smp.V)
		}
		if err != nil {
			reason := tsdbReason(err)
			i, ok := byReason[reason]
			if !ok {
				i = len(out.Rejected)
				byReason[reason] = i
				out.Rejected = append(out.Rejected, Rejection{Reason: reason, Detail: fmt.Sprintf("%s at %d: %v", lset.String(), smp.T, err)})
			}
			out.Rejected[i].N++
			err = nil
			continue
		}
		out.Accepted++
	}
	return out, nil
}

// tsdbReason classifies a refusal of the head's rules.
func tsdbReason(err error) string {
	switch {
	case errors.Is(err, storage.ErrOutOfOrderSample):
		return "out of order"
	case errors.Is(err, storage.ErrDuplicateSampleForTimestamp):
		return "duplicate sample"
	}
	return "invalid sample"
}

func (s *TSDBSink) flush() error {
	if s.w == nil {
		return nil
	}
	w := s.w
	s.w = nil
	id, err := w.flush(s.dir, s.logger)
	if err != nil {
		return fmt.Errorf("tsdb: writing a block: %w", err)
	}
	if id == (ulid.ULID{}) {
		return nil
	}
	s.blocks++
	s.logger.Debug("block written", "ulid", id.String(), "window", time.UnixMilli(s.window).UTC())
	return nil
}

// Close writes the last block.
func (s *TSDBSink) Close() error { return s.flush() }

// Blocks returns the number of blocks written.
func (s *TSDBSink) Blocks() int { return s.blocks }

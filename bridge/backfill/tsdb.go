package backfill

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/prometheus/prometheus/model/labels"
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

// NewTSDBSink writes blocks into dir (created if needed).
func NewTSDBSink(dir string, logger *slog.Logger) *TSDBSink {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &TSDBSink{dir: dir, logger: logger, window: -1}
}

// Write appends samples; it returns how many were refused as the TSDB head
// refuses them (older than the series' last sample, or at its timestamp
// with another value), with the first error.
func (s *TSDBSink) Write(batch []Sample) (rejected int, err error) {
	rangeMs := blockRange.Milliseconds()
	var first error
	for i := range batch {
		smp := &batch[i]
		win := smp.T - smp.T%rangeMs
		if smp.T < 0 && smp.T%rangeMs != 0 {
			win -= rangeMs
		}
		if win != s.window || s.w == nil {
			if err := s.flush(); err != nil {
				return rejected, err
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
			rejected++
			if first == nil {
				first = fmt.Errorf("%s at %d: %w", lset.String(), smp.T, err)
			}
			err = nil
		}
	}
	return rejected, first
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

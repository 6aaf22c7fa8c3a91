package backfill

// A direct writer of Prometheus TSDB blocks. It produces what
// tsdb.BlockWriter produces (a head that is then compacted by
// LeveledCompactor.Write into one level-1 block), using only the light TSDB
// packages (index, chunks, chunkenc, tombstones, fileutil): importing the
// tsdb package itself links prometheus/config and the cloud SDKs behind it
// into the binary, and runs their package initialisation at every start.
//
// What is mirrored from Prometheus v0.315.0, so that the blocks are the
// same, file for file, but for the ULID:
//   - the head appender's acceptance rules (memSeries.appendable with no
//     out-of-order window): a sample older than the series' last one is
//     refused (storage.ErrOutOfOrderSample), one at the last timestamp with
//     other float64 bits is refused (duplicate sample for timestamp), one
//     with the same bits is dropped silently; labels with empty values are
//     dropped, and series with the same labels are one series;
//   - the head's chunk cutting (memSeries.appendPreprocessor): XOR chunks
//     that end at the chunk range's boundary, or earlier at the end time
//     predicted at a quarter of 120 samples, or at 240 samples, or above
//     chunkenc.MaxBytesPerXORChunkBeforeAppend bytes. The compactor writes
//     the head's chunks as they are (it re-encodes the open one, which gives
//     the same bytes);
//   - the compactor's output (LeveledCompactor.write, PopulateBlock): series
//     sorted by label set, their chunks written in that order by
//     chunks.Writer, the symbols (every label name and value and the empty
//     string, as the head's postings have them) and series by index.Writer,
//     which writes the postings, meta.json (level 1, sources [ulid],
//     version 1, maxTime one past the last sample), an empty tombstones
//     file, all in "<ulid>.tmp-for-creation", fsynced and renamed into place.
//
// The writer owns the samples of one block while it is being filled: per
// series, the bytes of its finished chunks and its open chunk's appender,
// never the samples as values.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/oklog/ulid/v2"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/tsdb/fileutil"
	"github.com/prometheus/prometheus/tsdb/index"
	"github.com/prometheus/prometheus/tsdb/tombstones"
)

const (
	// samplesPerChunk is the head's target of samples per chunk
	// (tsdb.DefaultSamplesPerChunk).
	samplesPerChunk = 120
	// tmpForCreation suffixes the directory a block is written in before
	// it is renamed into place (tsdb's tmpForCreationBlockDirSuffix).
	tmpForCreation = ".tmp-for-creation"
)

// errInvalidSample is tsdb.ErrInvalidSample's text.
var errInvalidSample = errors.New("invalid sample")

// blockWriter accumulates the series of one block. The zero value is not
// usable: see newBlockWriter.
type blockWriter struct {
	// chunkRange bounds chunks as the head's chunk range does (the
	// BlockWriter's head has its block size as chunk range).
	chunkRange int64
	series     []*blockSeries
	byHash     map[uint64][]*blockSeries
	mint, maxt int64 // of the accepted samples
}

// blockSeries is one series of a block being written.
type blockSeries struct {
	lset labels.Labels
	// done are the finished chunks, their bytes trimmed to size.
	done []chunks.Meta
	// the open chunk (nil before the first sample), its time range and the
	// time at which the next one is cut
	chunk      *chunkenc.XORChunk
	app        chunkenc.Appender
	minT, maxT int64
	nextAt     int64
	last       float64 // the last sample's value
}

func newBlockWriter(chunkRange int64) *blockWriter {
	return &blockWriter{chunkRange: chunkRange, byHash: map[uint64][]*blockSeries{}, mint: math.MaxInt64, maxt: math.MinInt64}
}

// seriesFor returns the series of lset, created if needed. As in the head,
// labels with an empty value are dropped, and a label set left empty or
// with a name twice is refused.
func (w *blockWriter) seriesFor(lset labels.Labels) (*blockSeries, error) {
	lset = lset.WithoutEmpty()
	if lset.IsEmpty() {
		return nil, fmt.Errorf("empty labelset: %w", errInvalidSample)
	}
	if l, dup := lset.HasDuplicateLabelNames(); dup {
		return nil, fmt.Errorf(`label name "%s" is not unique: %w`, l, errInvalidSample)
	}
	h := lset.Hash()
	for _, s := range w.byHash[h] {
		if labels.Equal(s.lset, lset) {
			return s, nil
		}
	}
	s := &blockSeries{lset: lset}
	w.byHash[h] = append(w.byHash[h], s)
	w.series = append(w.series, s)
	return s, nil
}

// append adds a sample to s, or refuses it as the head appender would:
// storage.ErrOutOfOrderSample, or a duplicate sample for timestamp error.
// A sample equal (timestamp and value bits) to the last one is dropped
// without error.
func (w *blockWriter) append(s *blockSeries, t int64, v float64) error {
	if s.chunk != nil {
		switch {
		case t < s.maxT:
			return storage.ErrOutOfOrderSample
		case t == s.maxT:
			if math.Float64bits(s.last) != math.Float64bits(v) {
				return storage.NewDuplicateFloatErr(t, s.last, v)
			}
			return nil
		}
	}
	// memSeries.appendPreprocessor, for XOR chunks.
	created := false
	if s.chunk == nil {
		s.cut(t, w.chunkRange)
		created = true
	}
	if !created && len(s.chunk.Bytes()) > chunkenc.MaxBytesPerXORChunkBeforeAppend {
		s.cut(t, w.chunkRange)
	}
	n := s.chunk.NumSamples()
	if n == 0 {
		s.minT = t
		s.nextAt = rangeForTimestamp(t, w.chunkRange)
	}
	if n == samplesPerChunk/4 {
		s.nextAt = computeChunkEndTime(s.minT, s.maxT, s.nextAt, 4)
	}
	if t >= s.nextAt || n >= samplesPerChunk*2 {
		s.cut(t, w.chunkRange)
	}
	s.app.Append(0, t, v)
	s.maxT, s.last = t, v
	w.mint, w.maxt = min(w.mint, t), max(w.maxt, t)
	return nil
}

// cut finishes the open chunk, if any, and opens one starting at mint
// (memSeries.cutNewHeadChunk).
func (s *blockSeries) cut(mint, chunkRange int64) {
	if s.chunk != nil {
		// The finished chunk keeps only its bytes, not the appender's
		// spare capacity.
		c, err := chunkenc.FromData(chunkenc.EncXOR, bytes.Clone(s.chunk.Bytes()))
		if err != nil {
			panic(err) // EncXOR is a valid encoding
		}
		s.done = append(s.done, chunks.Meta{Chunk: c, MinTime: s.minT, MaxTime: s.maxT})
	}
	s.chunk = chunkenc.NewXORChunk()
	app, err := s.chunk.Appender()
	if err != nil {
		panic(err) // an empty XOR chunk always has an appender
	}
	s.app = app
	s.minT, s.maxT = mint, math.MinInt64
	s.nextAt = rangeForTimestamp(mint, chunkRange)
}

// rangeForTimestamp is the end of the chunk range t is in (tsdb's).
func rangeForTimestamp(t, width int64) int64 {
	return (t/width)*width + width
}

// computeChunkEndTime is the head's estimate of where to end a chunk so that
// the chunks up to maxT have the same number of samples (tsdb's).
func computeChunkEndTime(start, cur, maxT int64, ratioToFull float64) int64 {
	n := float64(maxT-start) / (float64(cur-start+1) * ratioToFull)
	if n <= 1 {
		return maxT
	}
	return int64(float64(start) + float64(maxT-start)/math.Floor(n))
}

// blockMeta is meta.json: tsdb.BlockMeta's fields that a level-1 block
// written from a head has, with the same JSON names.
type blockMeta struct {
	ULID    ulid.ULID `json:"ulid"`
	MinTime int64     `json:"minTime"`
	MaxTime int64     `json:"maxTime"`
	Stats   struct {
		NumSamples          uint64 `json:"numSamples,omitempty"`
		NumFloatSamples     uint64 `json:"numFloatSamples,omitempty"`
		NumHistogramSamples uint64 `json:"numHistogramSamples,omitempty"`
		NumSeries           uint64 `json:"numSeries,omitempty"`
		NumChunks           uint64 `json:"numChunks,omitempty"`
		NumTombstones       uint64 `json:"numTombstones,omitempty"`
	} `json:"stats,omitempty"`
	Compaction struct {
		Level   int         `json:"level"`
		Sources []ulid.ULID `json:"sources,omitempty"`
	} `json:"compaction"`
	Version int `json:"version"`
}

// flush writes the block into a new directory of dir, named by its ULID,
// and returns the ULID; with no sample, it writes nothing and returns the
// zero ULID.
func (w *blockWriter) flush(dir string, logger *slog.Logger) (ulid.ULID, error) {
	if w.maxt < w.mint {
		return ulid.ULID{}, nil
	}
	meta := &blockMeta{ULID: ulid.MustNew(ulid.Now(), rand.Reader), MinTime: w.mint, MaxTime: w.maxt + 1, Version: 1}
	meta.Compaction.Level = 1
	meta.Compaction.Sources = []ulid.ULID{meta.ULID}
	final := filepath.Join(dir, meta.ULID.String())
	tmp := final + tmpForCreation
	if err := w.write(tmp, meta, logger); err != nil {
		if rerr := os.RemoveAll(tmp); rerr != nil {
			logger.Error("removing a partly written block", "dir", tmp, "err", rerr)
		}
		return ulid.ULID{}, err
	}
	if err := fileutil.Replace(tmp, final); err != nil {
		return ulid.ULID{}, fmt.Errorf("renaming %s to %s: %w", tmp, final, err)
	}
	return meta.ULID, nil
}

// write writes the block's files into tmp, as LeveledCompactor.write does.
func (w *blockWriter) write(tmp string, meta *blockMeta, logger *slog.Logger) (err error) {
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.MkdirAll(tmp, 0o777); err != nil {
		return err
	}
	slices.SortFunc(w.series, func(a, b *blockSeries) int { return labels.Compare(a.lset, b.lset) })

	chunkDir := filepath.Join(tmp, "chunks")
	cw, err := chunks.NewWriter(chunkDir, chunks.WithSegmentSize(chunks.DefaultChunkSegmentSize))
	if err != nil {
		return fmt.Errorf("opening the chunk writer in %s: %w", chunkDir, err)
	}
	defer func() {
		if cw != nil {
			err = errors.Join(err, cw.Close())
		}
	}()
	indexFile := filepath.Join(tmp, "index")
	iw, err := index.NewWriter(context.Background(), indexFile)
	if err != nil {
		return fmt.Errorf("opening the index writer %s: %w", indexFile, err)
	}
	defer func() {
		if iw != nil {
			err = errors.Join(err, iw.Close())
		}
	}()

	// The head's symbols: every label name and value, and "" (the
	// all-postings key's name and value).
	syms := map[string]struct{}{"": {}}
	for _, s := range w.series {
		s.lset.Range(func(l labels.Label) {
			syms[l.Name] = struct{}{}
			syms[l.Value] = struct{}{}
		})
	}
	sorted := make([]string, 0, len(syms))
	for s := range syms {
		sorted = append(sorted, s)
	}
	slices.Sort(sorted)
	for _, s := range sorted {
		if err := iw.AddSymbol(s); err != nil {
			return fmt.Errorf("adding a symbol to %s: %w", indexFile, err)
		}
	}

	var chks []chunks.Meta
	for i, s := range w.series {
		chks = append(append(chks[:0], s.done...), chunks.Meta{Chunk: s.chunk, MinTime: s.minT, MaxTime: s.maxT})
		if err := cw.WriteChunks(chks...); err != nil {
			return fmt.Errorf("writing chunks into %s: %w", chunkDir, err)
		}
		if err := iw.AddSeries(storage.SeriesRef(i), s.lset, chks...); err != nil {
			return fmt.Errorf("adding series %s to %s: %w", s.lset, indexFile, err)
		}
		meta.Stats.NumChunks += uint64(len(chks))
		meta.Stats.NumSeries++
		for _, c := range chks {
			meta.Stats.NumSamples += uint64(c.Chunk.NumSamples())
		}
	}
	meta.Stats.NumFloatSamples = meta.Stats.NumSamples

	err, cw = cw.Close(), nil
	if err != nil {
		return fmt.Errorf("closing the chunks in %s: %w", chunkDir, err)
	}
	err, iw = iw.Close(), nil
	if err != nil {
		return fmt.Errorf("closing the index %s: %w", indexFile, err)
	}
	if err := writeBlockMeta(tmp, meta); err != nil {
		return err
	}
	if _, err := tombstones.WriteFile(logger, tmp, tombstones.NewMemTombstones()); err != nil {
		return fmt.Errorf("writing the tombstones file in %s: %w", tmp, err)
	}
	df, err := fileutil.OpenDir(tmp)
	if err != nil {
		return fmt.Errorf("opening %s: %w", tmp, err)
	}
	if err := df.Sync(); err != nil {
		df.Close()
		return fmt.Errorf("syncing %s: %w", tmp, err)
	}
	if err := df.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", tmp, err)
	}
	return nil
}

// writeBlockMeta writes meta.json into dir as tsdb's writeMetaFile does:
// through a temporary file, synced and renamed.
func writeBlockMeta(dir string, meta *blockMeta) error {
	path := filepath.Join(dir, "meta.json")
	tmp := path + ".tmp"
	defer os.RemoveAll(tmp)
	data, err := json.MarshalIndent(meta, "", "\t")
	if err != nil {
		return fmt.Errorf("encoding %s: %w", path, err)
	}
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("syncing %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", tmp, err)
	}
	if err := fileutil.Replace(tmp, path); err != nil {
		return fmt.Errorf("renaming %s to %s: %w", tmp, path, err)
	}
	return nil
}

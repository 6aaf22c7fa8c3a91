package backfill

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/tsdb/index"

	"github.com/pcp-exporter/pcp-exporter/mapping"
)

// blockWriterSink is what TSDBSink was before it wrote blocks itself:
// tsdb.BlockWriter, a block per window. It commits after every sample, so
// that every sample is checked against the series' committed samples and
// refusals come back from Append (a commit of several samples drops the
// refused ones of the batch silently).
type blockWriterSink struct {
	dir    string
	w      *tsdb.BlockWriter
	window int64
	refs   map[int]storage.SeriesRef
}

func (s *blockWriterSink) Write(_ context.Context, batch []Sample) (Outcome, error) {
	n, err := s.write(batch)
	if err != nil && n == 0 {
		return Outcome{}, err
	}
	out := Outcome{Accepted: len(batch) - n}
	if n > 0 {
		out.Rejected = []Rejection{{Reason: "any", N: n, Detail: err.Error()}}
	}
	return out, nil
}

func (s *blockWriterSink) write(batch []Sample) (rejected int, err error) {
	rangeMs := blockRange.Milliseconds()
	var first error
	for _, smp := range batch {
		win := smp.T - smp.T%rangeMs
		if smp.T < 0 && smp.T%rangeMs != 0 {
			win -= rangeMs
		}
		if s.w == nil || win != s.window {
			if err := s.Close(); err != nil {
				return rejected, err
			}
			w, err := tsdb.NewBlockWriter(slog.New(slog.DiscardHandler), s.dir, 2*rangeMs)
			if err != nil {
				return rejected, err
			}
			s.w, s.window, s.refs = w, win, map[int]storage.SeriesRef{}
		}
		var b labels.ScratchBuilder
		for _, l := range smp.Series.Labels {
			b.Add(l.Name, l.Value)
		}
		b.Sort()
		lset := b.Labels()
		app := s.w.Appender(context.Background())
		ref, err := app.Append(s.refs[smp.Series.ID], lset, smp.T, smp.V)
		if err != nil {
			rejected++
			if first == nil {
				first = fmt.Errorf("%s at %d: %w", lset.String(), smp.T, err)
			}
			app.Rollback()
			continue
		}
		s.refs[smp.Series.ID] = ref
		if err := app.Commit(); err != nil {
			return rejected, err
		}
	}
	return rejected, first
}

func (s *blockWriterSink) Close() error {
	if s.w == nil {
		return nil
	}
	defer s.w.Close()
	_, err := s.w.Flush(context.Background())
	s.w = nil
	return err
}

// blockStreams are samples of several series over three windows and a bit:
// irregular timestamps; a counter (chunks cut at the predicted end time), a
// series of random values (cut by size), one whose rate jumps (cut at 240
// samples), NaN and stale markers, a label with an empty value (dropped,
// which makes two series one), refused samples (out of order, duplicate
// timestamp with another value, a stale marker after a NaN at the same
// time) and dropped ones (same timestamp and value bits).
func blockStreams() (samples []Sample, wantRejected int) {
	r := rand.New(rand.NewPCG(1, 2))
	mk := func(id int, kv ...string) *Series {
		s := &Series{ID: id}
		for i := 0; i < len(kv); i += 2 {
			s.Labels = append(s.Labels, mapping.LabelPair{Name: kv[i], Value: kv[i+1]})
		}
		return s
	}
	counter := mk(0, "__name__", "a_counter", "host", "h1")
	random := mk(1, "__name__", "b_random", "host", "h1")
	rate := mk(2, "__name__", "c_rate", "host", "h2")
	nans := mk(3, "__name__", "d_nan", "inst", "")
	nans2 := mk(4, "__name__", "d_nan") // the same series as nans
	short := mk(5, "__name__", "e_short", "z", "last")

	start := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC).UnixMilli() + 1234
	end := start + 7*time.Hour.Milliseconds()
	add := func(s *Series, t int64, v float64) { samples = append(samples, Sample{Series: s, T: t, V: v}) }
	c := 0.0
	for t := start; t < end; t += 15000 + r.Int64N(2000) - 1000 {
		c += float64(r.IntN(100))
		add(counter, t, c)
	}
	for t := start + 500; t < end; t += 1000 + r.Int64N(9000) {
		add(random, t, r.NormFloat64()*1e6)
	}
	for t, i := start, 0; t < end; i++ {
		add(rate, t, float64(i%7))
		if i < 40 || (i > 2000 && i < 2100) {
			t += 60000
		} else {
			t += 100 + r.Int64N(50)
		}
	}
	for t, i := start+7, 0; t < end; t, i = t+20000+r.Int64N(100), i+1 {
		v := float64(i)
		switch i % 17 {
		case 3:
			v = math.NaN()
		case 5, 6:
			v = math.Float64frombits(value.StaleNaN)
		}
		s := nans
		if i%3 == 1 {
			s = nans2
		}
		add(s, t, v)
	}
	for t := start + time.Hour.Milliseconds(); t < start+time.Hour.Milliseconds()+50000; t += 10000 {
		add(short, t, 42)
	}
	sort.SliceStable(samples, func(i, j int) bool { return samples[i].T < samples[j].T })

	// Anomalies, after the sample of a series at about the given time.
	insert := func(s *Series, near int64, f func(last Sample) []Sample) {
		for i := range samples {
			if samples[i].Series == s && samples[i].T >= near {
				extra := f(samples[i])
				samples = slices.Insert(samples, i+1, extra...)
				return
			}
		}
		panic("no sample")
	}
	h := time.Hour.Milliseconds()
	insert(counter, start+h, func(l Sample) []Sample {
		return []Sample{
			{Series: counter, T: l.T - 1000, V: 1},       // out of order
			{Series: counter, T: l.T, V: l.V},            // same: dropped
			{Series: counter, T: l.T, V: l.V + 1},        // duplicate timestamp, other value
			{Series: counter, T: l.T - 60000, V: l.V},    // out of order
			{Series: counter, T: l.T + 1, V: l.V + 0.5},  // fine
			{Series: counter, T: l.T + 1, V: l.V + 0.25}, // duplicate
		}
	})
	insert(random, start+3*h, func(l Sample) []Sample {
		return []Sample{{Series: random, T: l.T, V: l.V}, {Series: random, T: l.T, V: -l.V}}
	})
	nan := math.NaN()
	stale := math.Float64frombits(value.StaleNaN)
	insert(nans, start+5*h, func(l Sample) []Sample {
		return []Sample{
			{Series: nans, T: l.T + 1, V: nan},
			{Series: nans2, T: l.T + 1, V: nan},   // same bits: dropped
			{Series: nans, T: l.T + 1, V: stale},  // other bits: duplicate
			{Series: nans2, T: l.T + 2, V: stale}, // fine
			{Series: nans, T: l.T + 2, V: stale},  // dropped
			{Series: nans, T: l.T + 2, V: nan},    // duplicate
			{Series: nans, T: l.T + 2, V: 0},      // duplicate
		}
	})
	return samples, 4 + 1 + 3
}

// writeStreams writes samples in batches of 1000 through sink.
func writeStreams(t *testing.T, sink Sink, samples []Sample) (rejected int, errs []string) {
	t.Helper()
	for i := 0; i < len(samples); i += 1000 {
		out, err := sink.Write(context.Background(), samples[i:min(i+1000, len(samples))])
		if err != nil {
			t.Fatal(err)
		}
		if n := out.rejected(); n > 0 {
			rejected += n
			errs = append(errs, out.Rejected[0].Detail)
		}
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	return rejected, errs
}

// blockDump is what a block holds, but for its ULID.
type blockDump struct {
	Meta   tsdb.BlockMeta
	Series []seriesDump
	Files  map[string][]byte // the files but meta.json
}

type seriesDump struct {
	Labels string
	Chunks []chunkDump
}

type chunkDump struct {
	MinT, MaxT int64
	Bytes      []byte
	Samples    []string // t and value bits
}

// dumpBlocks reads the blocks of dir with tsdb.OpenBlock, in time order.
func dumpBlocks(t *testing.T, dir string) []blockDump {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []blockDump
	for _, e := range entries {
		bdir := filepath.Join(dir, e.Name())
		if !e.IsDir() || strings.Contains(e.Name(), ".tmp") {
			t.Fatalf("%s: not a block", bdir)
		}
		b, err := tsdb.OpenBlock(nil, bdir, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		d := blockDump{Meta: b.Meta(), Files: map[string][]byte{}}
		if len(d.Meta.Compaction.Sources) != 1 || d.Meta.Compaction.Sources[0] != d.Meta.ULID || d.Meta.ULID.String() != e.Name() {
			t.Errorf("%s: meta %+v", bdir, d.Meta)
		}
		// meta.json with the ULID blanked
		raw, err := os.ReadFile(filepath.Join(bdir, "meta.json"))
		if err != nil {
			t.Fatal(err)
		}
		d.Files["meta.json"] = bytes.ReplaceAll(raw, []byte(d.Meta.ULID.String()), []byte("ULID"))
		d.Meta.ULID, d.Meta.Compaction.Sources = [16]byte{}, nil
		for _, f := range []string{"index", "tombstones", "chunks/000001"} {
			if d.Files[f], err = os.ReadFile(filepath.Join(bdir, f)); err != nil {
				t.Fatal(err)
			}
		}
		ir, err := b.Index()
		if err != nil {
			t.Fatal(err)
		}
		cr, err := b.Chunks()
		if err != nil {
			t.Fatal(err)
		}
		k, v := index.AllPostingsKey()
		p, err := ir.Postings(context.Background(), k, v)
		if err != nil {
			t.Fatal(err)
		}
		var sb labels.ScratchBuilder
		var metas []chunks.Meta
		for p.Next() {
			if err := ir.Series(p.At(), &sb, &metas); err != nil {
				t.Fatal(err)
			}
			sd := seriesDump{Labels: sb.Labels().String()}
			for _, m := range metas {
				c, _, err := cr.ChunkOrIterable(m)
				if err != nil {
					t.Fatal(err)
				}
				cd := chunkDump{MinT: m.MinTime, MaxT: m.MaxTime, Bytes: bytes.Clone(c.Bytes())}
				it := c.Iterator(nil)
				for it.Next() == chunkenc.ValFloat {
					ts, v := it.At()
					cd.Samples = append(cd.Samples, fmt.Sprintf("%d %#x", ts, math.Float64bits(v)))
				}
				if it.Err() != nil {
					t.Fatal(it.Err())
				}
				sd.Chunks = append(sd.Chunks, cd)
			}
			d.Series = append(d.Series, sd)
		}
		if p.Err() != nil {
			t.Fatal(p.Err())
		}
		ir.Close()
		cr.Close()
		b.Close()
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Meta.MinTime < out[j].Meta.MinTime })
	return out
}

// TestBlocksAsBlockWriter writes the same samples through TSDBSink and
// through tsdb.BlockWriter and finds the same blocks: series, chunks (time
// ranges and bytes), samples, meta.json, and every file byte for byte but
// for the ULID.
func TestBlocksAsBlockWriter(t *testing.T) {
	t.Parallel()
	samples, wantRejected := blockStreams()
	newDir, refDir := t.TempDir(), t.TempDir()
	sink := NewTSDBSink(newDir, nil)
	rej, errs := writeStreams(t, sink, samples)
	refRej, refErrs := writeStreams(t, &blockWriterSink{dir: refDir}, samples)
	if rej != refRej || rej != wantRejected || !slices.Equal(errs, refErrs) {
		t.Errorf("rejected %d %q; BlockWriter %d %q; want %d", rej, errs, refRej, refErrs, wantRejected)
	}
	got, want := dumpBlocks(t, newDir), dumpBlocks(t, refDir)
	if sink.Blocks() != len(want) || len(got) != len(want) || len(want) != 4 {
		t.Fatalf("%d blocks (Blocks() %d), BlockWriter %d, want 4", len(got), sink.Blocks(), len(want))
	}
	var nchunks, nseries int
	for i := range want {
		g, w := got[i], want[i]
		if fmt.Sprintf("%+v", g.Meta) != fmt.Sprintf("%+v", w.Meta) {
			t.Errorf("block %d: meta\n%+v\nBlockWriter's\n%+v", i, g.Meta, w.Meta)
		}
		if len(g.Series) != len(w.Series) {
			t.Errorf("block %d: %d series, BlockWriter %d", i, len(g.Series), len(w.Series))
		}
		for j := range min(len(g.Series), len(w.Series)) {
			gs, ws := g.Series[j], w.Series[j]
			if gs.Labels != ws.Labels || len(gs.Chunks) != len(ws.Chunks) {
				t.Errorf("block %d series %d: %s, %d chunks; BlockWriter: %s, %d chunks", i, j, gs.Labels, len(gs.Chunks), ws.Labels, len(ws.Chunks))
				continue
			}
			for k := range gs.Chunks {
				gc, wc := gs.Chunks[k], ws.Chunks[k]
				if gc.MinT != wc.MinT || gc.MaxT != wc.MaxT || !slices.Equal(gc.Samples, wc.Samples) || !bytes.Equal(gc.Bytes, wc.Bytes) {
					t.Errorf("block %d %s chunk %d: [%d, %d] %d samples; BlockWriter: [%d, %d] %d samples", i, gs.Labels, k, gc.MinT, gc.MaxT, len(gc.Samples), wc.MinT, wc.MaxT, len(wc.Samples))
				}
			}
			nchunks += len(ws.Chunks)
		}
		nseries += len(w.Series)
		for f, b := range w.Files {
			if !bytes.Equal(g.Files[f], b) {
				t.Errorf("block %d: %s differs (%d bytes, BlockWriter %d)", i, f, len(g.Files[f]), len(b))
			}
		}
	}
	// The streams do what they are for.
	if nchunks < 4*nseries {
		t.Errorf("%d chunks for %d series: few cut", nchunks, nseries)
	}
	t.Logf("%d blocks, %d series, %d chunks, %d samples, %d rejected", len(want), nseries, nchunks, len(samples), rej)
}

package pcplog

import (
	"bufio"
	"compress/bzip2"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
	"github.com/ulikunitz/xz/lzma"
)

// compressionSuffixes are tried in libpcp's order when the plain file is
// absent (__pmCompressedFileIndex).
var compressionSuffixes = []string{".xz", ".lzma", ".bz2", ".bz", ".gz", ".Z", ".z", ".zst"}

func compressionOf(name string) string {
	for _, s := range compressionSuffixes {
		if strings.HasSuffix(name, s) {
			return s
		}
	}
	return ""
}

// BaseName strips from path the parts that name one file of an archive: a
// compression suffix, then ".meta", ".index" or ".N" (a volume number).
func BaseName(path string) string {
	p := strings.TrimSuffix(path, compressionOf(path))
	for _, s := range []string{".meta", ".index"} {
		if strings.HasSuffix(p, s) {
			return strings.TrimSuffix(p, s)
		}
	}
	if i := strings.LastIndexByte(p, '.'); i > 0 && i < len(p)-1 && isDigits(p[i+1:]) {
		return p[:i]
	}
	if p != path {
		return p
	}
	return path
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// findFile returns the path of name or of its first compressed variant.
func findFile(name string) (string, error) {
	if _, err := os.Stat(name); err == nil {
		return name, nil
	}
	for _, s := range compressionSuffixes {
		if _, err := os.Stat(name + s); err == nil {
			return name + s, nil
		}
	}
	_, err := os.Stat(name)
	return "", err
}

type volumeFile struct {
	num  int
	path string
}

// findVolumes lists base.N[.suffix] in base's directory, by volume number;
// a plain file wins over a compressed one of the same number.
func findVolumes(base string) ([]volumeFile, error) {
	dir, prefix := filepath.Split(base)
	if dir == "" {
		dir = "."
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	byNum := map[int]string{}
	rank := map[int]int{}
	for _, e := range ents {
		n := e.Name()
		if !strings.HasPrefix(n, prefix+".") {
			continue
		}
		rest := n[len(prefix)+1:]
		suf := compressionOf(rest)
		rest = strings.TrimSuffix(rest, suf)
		if !isDigits(rest) || len(rest) > 9 {
			continue
		}
		num, _ := strconv.Atoi(rest)
		r := 0
		if suf != "" {
			r = 1 + indexOf(compressionSuffixes, suf)
		}
		if old, ok := rank[num]; ok && old <= r {
			continue
		}
		rank[num] = r
		byNum[num] = filepath.Join(filepath.Dir(base), n)
	}
	vols := make([]volumeFile, 0, len(byNum))
	for n, p := range byNum {
		vols = append(vols, volumeFile{n, p})
	}
	sort.Slice(vols, func(i, j int) bool { return vols[i].num < vols[j].num })
	return vols, nil
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// ErrUnsupportedCompression is returned for .Z files (compress(1) LZW).
var ErrUnsupportedCompression = errors.New("unsupported compression")

// stream is an open archive file: decompressed on the fly when compressed.
type stream struct {
	path  string
	f     *os.File
	r     io.Reader
	plain bool
	close func() error
}

func openStream(path string) (*stream, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	s := &stream{path: path, f: f, r: f, close: f.Close}
	suf := compressionOf(path)
	if suf == "" {
		s.plain = true
		return s, nil
	}
	fail := func(err error) (*stream, error) {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	br := bufio.NewReaderSize(f, 256<<10)
	switch suf {
	case ".xz":
		xr, err := xz.ReaderConfig{SingleStream: false}.NewReader(br)
		if err != nil {
			return fail(err)
		}
		s.r = xr
	case ".lzma":
		lr, err := lzma.NewReader(br)
		if err != nil {
			return fail(err)
		}
		s.r = lr
	case ".bz2", ".bz":
		s.r = bzip2.NewReader(br)
	case ".gz", ".z":
		gr, err := gzip.NewReader(br)
		if err != nil {
			return fail(err)
		}
		s.r = gr
	case ".zst":
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
		if err != nil {
			return fail(err)
		}
		s.r = zr
		s.close = func() error { zr.Close(); return f.Close() }
	default:
		return fail(fmt.Errorf("%w %q", ErrUnsupportedCompression, suf))
	}
	return s, nil
}

func (s *stream) Close() error { return s.close() }

// A compressed .meta may expand to at most metaExpansion times its
// compressed size, and at least to metaExpandedMin bytes; a compressed
// .index to indexExpansion times, at least indexExpandedMin. More is
// refused as a decompression bomb. Real archives stay far below: PCP QA's
// .meta files compress 5 to 69 times with xz -9e (pcp-pidstat.meta,
// repeated instance domains), their .index files 2 to 3 times.
const (
	metaExpansion    = 256
	metaExpandedMin  = 64 << 20
	indexExpansion   = 64
	indexExpandedMin = 4 << 20
)

// cappedReader reads a decompressed stream, failing with a FormatError
// once it yields more than limit bytes or the decompressor fails.
type cappedReader struct {
	r     io.Reader
	path  string
	n     int64 // bytes read
	limit int64
	comp  int64 // compressed size
	times int64 // the expansion allowed
}

func (c *cappedReader) Read(p []byte) (int, error) {
	if int64(len(p)) > c.limit+1-c.n {
		p = p[:c.limit+1-c.n]
	}
	k, err := c.r.Read(p)
	c.n += int64(k)
	if c.n > c.limit {
		return k, &FormatError{File: c.path, Off: c.limit, Msg: fmt.Sprintf("decompresses to more than %d bytes (%d times its %d compressed bytes): refused as a decompression bomb (decompress it by hand to read it)", c.limit, c.times, c.comp)}
	}
	if err != nil && err != io.EOF {
		// a compressed stream cut short or corrupt: where its data ends
		err = &FormatError{File: c.path, Off: c.n, Msg: "decompress: " + err.Error()}
	}
	return k, err
}

// openCapped opens a compressed file for reading, its expansion capped to
// times its size, and at least to floor bytes.
func openCapped(path string, times, floor int64) (*stream, *cappedReader, error) {
	s, err := openStream(path)
	if err != nil {
		return nil, nil, err
	}
	fi, err := s.f.Stat()
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	c := &cappedReader{r: s.r, path: path, comp: fi.Size(), times: times, limit: max(floor, times*fi.Size())}
	return s, c, nil
}

// readAll reads a whole (small) file: .index, and a plain .meta. The
// allocation is bounded by the data actually present, and for a
// compressed .index by its size times indexExpansion.
func readAll(path string) ([]byte, error) {
	if compressionOf(path) == "" {
		// a buffer sized by the file, filled without regrowing; the
		// error names the file
		return os.ReadFile(path)
	}
	s, c, err := openCapped(path, indexExpansion, indexExpandedMin)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return readChunks(c)
}

// readChunks reads r to its end in chunks of up to 1 MiB joined once at
// the end: at most twice the data is held, where io.ReadAll's regrown
// buffers (and the garbage they leave) held four times a decompression
// bomb's capped output (TestCompressedBombs).
func readChunks(r io.Reader) ([]byte, error) {
	var chunks [][]byte
	total := 0
	for size := 4 << 10; ; size = min(2*size, 1<<20) {
		b := make([]byte, size)
		n, err := io.ReadFull(r, b)
		if n > 0 {
			chunks = append(chunks, b[:n])
			total += n
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	out := make([]byte, 0, total)
	for _, c := range chunks {
		out = append(out, c...)
	}
	return out, nil
}

// metaWindow is how much of a compressed .meta is decompressed at a time.
const metaWindow = 256 << 10

// readCompressedMeta decompresses and parses a compressed .meta file a
// window at a time: memory holds the metadata and one window (or the
// longest record), never the whole decompressed file.
func readCompressedMeta(path string) (Label, *meta, error) {
	s, c, err := openCapped(path, metaExpansion, metaExpandedMin)
	if err != nil {
		return Label{}, nil, err
	}
	defer s.Close()
	buf := make([]byte, 0, metaWindow)
	eof := false
	// fill reads until buf holds want bytes or the stream ends
	fill := func(want int) error {
		for len(buf) < want && !eof {
			if len(buf) == cap(buf) {
				buf = slices.Grow(buf, min(len(buf), want-len(buf)))
			}
			n, err := c.Read(buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+n]
			if err == io.EOF {
				eof = true
			} else if err != nil {
				return err
			}
		}
		return nil
	}
	if err := fill(metaWindow); err != nil {
		return Label{}, nil, err
	}
	l, err := ParseLabel(path, buf)
	if err != nil {
		return Label{}, nil, err
	}
	if err := checkMetaLabel(path, l); err != nil {
		return Label{}, nil, err
	}
	m := newMeta()
	m.off = int64(LabelSize(l.Version))
	if int(m.off) > len(buf) {
		return Label{}, nil, &FormatError{File: path, Off: int64(len(buf)), Msg: "label: file too short"}
	}
	buf = buf[:copy(buf, buf[m.off:])]
	for {
		used, err := m.parse(path, buf)
		if err != nil {
			return Label{}, nil, err
		}
		m.off += int64(used)
		buf = buf[:copy(buf, buf[used:])]
		if eof {
			if len(buf) > 0 { // a compressed archive is finished
				return Label{}, nil, &FormatError{File: path, Off: m.off, Msg: cutMsg("metadata", buf)}
			}
			return l, m, nil
		}
		want := metaWindow
		if len(buf) >= 4 {
			want = max(want, int(int32(be32(buf)))) // a record longer than the window
		}
		if err := fill(want); err != nil {
			return Label{}, nil, err
		}
	}
}

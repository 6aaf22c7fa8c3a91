package bridge

import (
	"sync"

	"github.com/klauspost/compress/gzip"
)

// gzPipe compresses a rendering while it is rendered: the renderer hands
// it full chunks and goes on rendering into another while a goroutine of
// the pipe compresses them in order. Once the sources are read (pmcd has
// answered), rendering and compressing are the scrape's whole work, and on
// two cores they take about the longer of the two instead of their sum
// (BenchmarkPMCDScrapePrometheus).
type gzPipe struct {
	gz   *gzip.Writer
	full chan []byte // chunks to compress, in order
	free chan []byte // chunks compressed, to render into again
	done chan struct{}
}

// gzPipeChunk is how much uncompressed exposition a chunk holds before it
// is handed over: small enough that compressing follows rendering closely.
const gzPipeChunk = 64 << 10

// pipeChunks are the pipe's two chunks, reused from scrape to scrape.
var pipeChunks = sync.Pool{New: func() any {
	var c [2][]byte
	for i := range c {
		c[i] = make([]byte, 0, gzPipeChunk+gzPipeChunk/2)
	}
	return &c
}}

// startGzPipe starts compressing into gz with the chunks of c, calling
// compressed after each chunk, and returns the pipe and the chunk to
// render into first.
func startGzPipe(gz *gzip.Writer, c *[2][]byte, compressed func()) (*gzPipe, []byte) {
	p := &gzPipe{gz: gz, full: make(chan []byte, 1), free: make(chan []byte, 2), done: make(chan struct{})}
	p.free <- c[1][:0]
	go func() {
		defer close(p.done)
		for b := range p.full {
			gz.Write(b) // into memory: no error
			compressed()
			p.free <- b[:0]
		}
	}()
	return p, c[0][:0]
}

// hand passes a full chunk to be compressed and returns an empty one, once
// the chunk handed before it is compressed.
func (p *gzPipe) hand(b []byte) []byte {
	p.full <- b
	return <-p.free
}

// close compresses the last chunk b, waits until every chunk is
// compressed, closes the gzip stream and returns the two chunks.
func (p *gzPipe) close(b []byte) [2][]byte {
	p.full <- b
	close(p.full)
	<-p.done
	p.gz.Close()
	return [2][]byte{<-p.free, <-p.free}
}

// appender is an io.Writer appending to b.
type appender struct{ b []byte }

func (a *appender) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}

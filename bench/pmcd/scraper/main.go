// Command scraper scrapes as Prometheus 2.42 (Debian 12's) does, for
// bench/pmcd/run.sh: over one connection per target kept alive from scrape
// to scrape (Prometheus keeps its connection to a target: `ss -tn` shows
// the same client port at every scrape), with its Accept header (-accept),
// User-Agent and scrape-timeout header, asking gzip and decompressing with
// compress/gzip (the decoder the prometheus binary links), or asking
// identity. One scrape per line read on stdin:
//
//	ENCODING URL BODYFILE [HEADERFILE]
//
// ENCODING is gzip or identity. For each line it prints the seconds from the
// request to the body's last byte (decompressed), the seconds to the
// response's headers, and the bytes received; then it writes the
// decompressed body to BODYFILE and the status line and headers to
// HEADERFILE.
package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

const prometheusAccept = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"

func main() {
	accept := flag.String("accept", prometheusAccept, "Accept header")
	flag.Parse()
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}, Timeout: time.Minute}
	in := bufio.NewScanner(os.Stdin)
	var body bytes.Buffer
	var zr gzip.Reader
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) < 3 || (f[0] != "gzip" && f[0] != "identity") {
			fail(fmt.Errorf("want ENCODING URL BODYFILE [HEADERFILE], got %q", in.Text()))
		}
		body.Reset()
		s, err := scrape(client, f[1], *accept, f[0], &body, &zr)
		if err != nil {
			fail(err)
		}
		fmt.Printf("%.6f %.6f %d\n", s.total.Seconds(), s.headers.Seconds(), s.bytes)
		if err := os.WriteFile(f[2], body.Bytes(), 0o644); err != nil {
			fail(err)
		}
		if len(f) > 3 {
			var h bytes.Buffer
			fmt.Fprintf(&h, "%s %s\r\n", s.resp.Proto, s.resp.Status)
			s.resp.Header.Write(&h)
			if err := os.WriteFile(f[3], h.Bytes(), 0o644); err != nil {
				fail(err)
			}
		}
	}
	if err := in.Err(); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "scraper:", err)
	os.Exit(1)
}

// scraped is one scrape's response and times.
type scraped struct {
	resp           *http.Response
	total, headers time.Duration
	bytes          int64 // received (compressed when gzip)
}

// scrape reads url's body into body, decompressed (with zr).
func scrape(client *http.Client, url, accept, encoding string, body *bytes.Buffer, zr *gzip.Reader) (scraped, error) {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return scraped{}, err
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("Accept-Encoding", encoding)
	req.Header.Set("User-Agent", "Prometheus/2.42.0+ds")
	req.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", "10")
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return scraped{}, err
	}
	defer resp.Body.Close()
	s := scraped{resp: resp, headers: time.Since(start)}
	if resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("%s: %s", url, resp.Status)
	}
	c := &counter{r: resp.Body}
	var r io.Reader = c
	if resp.Header.Get("Content-Encoding") == "gzip" {
		if err := zr.Reset(c); err != nil {
			return s, fmt.Errorf("%s: %w", url, err)
		}
		r = zr
	}
	if _, err := body.ReadFrom(r); err != nil {
		return s, fmt.Errorf("%s: %w", url, err)
	}
	if _, err := io.Copy(io.Discard, c); err != nil { // to the end, so the connection is kept
		return s, fmt.Errorf("%s: %w", url, err)
	}
	s.total, s.bytes = time.Since(start), c.n
	return s, nil
}

// counter counts the bytes read through it.
type counter struct {
	r io.Reader
	n int64
}

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

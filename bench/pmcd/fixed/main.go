// Command fixed is the floor of a scrape for bench/pmcd/run.sh: an HTTP
// server that renders nothing and fetches nothing, and answers every
// request with one fixed exposition (the exporter's own body, read from
// BODYFILE) under the exporter's headers. What a scrape of it costs is what
// any exporter of those bytes pays here for HTTP, gzip and the scraper's
// decompression:
//
//	/gzip      compressed for each request asking gzip, at gzip.BestSpeed
//	           with klauspost/compress (as the exporter compresses)
//	/pre       compressed once, at start: HTTP and decompression only
//	/hello     three bytes: HTTP alone
//
// usage: fixed ADDRESS BODYFILE
package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
)

const contentType = "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=underscores"

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: fixed ADDRESS BODYFILE")
		os.Exit(2)
	}
	body, err := os.ReadFile(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "fixed:", err)
		os.Exit(1)
	}
	var (
		pre, out bytes.Buffer
		mu       sync.Mutex // out and gz, for requests made at once
	)
	gz, _ := gzip.NewWriterLevel(&pre, gzip.BestSpeed)
	gz.Write(body)
	gz.Close()
	exposition := func(w http.ResponseWriter, r *http.Request, compressed func() []byte) {
		w.Header().Set("Content-Type", contentType)
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			w.Write(body)
			return
		}
		w.Header().Set("Content-Encoding", "gzip")
		w.Write(compressed())
	}
	http.HandleFunc("/gzip", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		exposition(w, r, func() []byte {
			out.Reset()
			gz.Reset(&out)
			gz.Write(body)
			gz.Close()
			return out.Bytes()
		})
	})
	http.HandleFunc("/pre", func(w http.ResponseWriter, r *http.Request) {
		exposition(w, r, pre.Bytes)
	})
	http.HandleFunc("/hello", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	})
	fmt.Fprintln(os.Stderr, "fixed:", http.ListenAndServe(os.Args[1], nil))
	os.Exit(1)
}

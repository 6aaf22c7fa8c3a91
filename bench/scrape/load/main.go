// Command load scrapes one URL with many concurrent clients for a while, as
// Prometheus scrapes (its Accept header and gzip by default), for
// bench/scrape/run.sh: every scrape must complete with 200 and be read to
// the end; it prints the scrapes, the failures and the latency median, p99
// and maximum, and with -pid the peak RSS of that process (VmHWM).
//
//	load -c 64 -d 60s -pid PID URL
package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

const prometheusAccept = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"

func main() {
	conc := flag.Int("c", 64, "concurrent scrapers")
	dur := flag.Duration("d", 60*time.Second, "how long to scrape")
	accept := flag.String("accept", prometheusAccept, "Accept header")
	gzip := flag.Bool("gzip", true, "ask for gzip (and read the compressed bytes)")
	pid := flag.Int("pid", 0, "report this process's peak RSS")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: load [-c N] [-d DURATION] [-accept HEADER] [-gzip=false] [-pid PID] URL")
		os.Exit(2)
	}
	url := flag.Arg(0)
	client := &http.Client{Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: *conc}, Timeout: time.Minute}
	var mu sync.Mutex
	var lat []time.Duration
	failed := 0
	var firstErr error
	end := time.Now().Add(*dur)
	var wg sync.WaitGroup
	for i := 0; i < *conc; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				start := time.Now()
				err := scrape(client, url, *accept, *gzip)
				d := time.Since(start)
				mu.Lock()
				if err != nil {
					failed++
					if firstErr == nil {
						firstErr = err
					}
				} else {
					lat = append(lat, d)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	slices.Sort(lat)
	q := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))].Seconds()
	}
	fmt.Printf("%d scrapers for %s: %d scrapes, %d failed, latency median %.4f s, p99 %.4f s, max %.4f s", *conc, *dur, len(lat), failed, q(0.5), q(0.99), q(1))
	if *pid != 0 {
		fmt.Printf(", peak RSS %s", peakRSS(*pid))
	}
	fmt.Println()
	if firstErr != nil {
		fmt.Fprintln(os.Stderr, "load: first failure:", firstErr)
		os.Exit(1)
	}
}

func scrape(client *http.Client, url, accept string, gzip bool) error {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", accept)
	if gzip {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s", resp.Status)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return fmt.Errorf("%d of %d bytes", n, resp.ContentLength)
	}
	return nil
}

func peakRSS(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "unknown"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			var kb float64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			return fmt.Sprintf("%.1f MiB", kb/1024)
		}
	}
	return "unknown"
}

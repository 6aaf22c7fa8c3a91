package httpd

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestWatchdog holds a lock that the sources' status needs past the
// health timeout: /-/healthy fails, with one probe outstanding however many
// checks come, and succeeds again once the lock is free. A scrape stuck
// past the write timeout fails it too.
func TestWatchdog(t *testing.T) {
	var lock sync.Mutex
	var probes atomic.Int32
	wd := NewWatchdog(300*time.Millisecond, 200*time.Millisecond, func() {
		probes.Add(1)
		lock.Lock()
		//lint:ignore SA2001 the probe only waits for the lock, as the real one waits for an MMV directory's
		lock.Unlock()
	})
	srv := httptest.NewServer(wd.Healthy(slog.New(slog.DiscardHandler)))
	defer srv.Close()
	get := func() int {
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := get(); s != http.StatusOK {
		t.Fatalf("healthy at first: %d", s)
	}
	lock.Lock()
	g0 := runtime.NumGoroutine()
	deadline := time.Now().Add(5 * time.Second)
	s := get()
	for s == http.StatusOK && time.Now().Before(deadline) {
		s = get()
	}
	if s != http.StatusServiceUnavailable {
		t.Fatalf("lock held past the timeout: %d, want 503", s)
	}
	p := probes.Load()
	for range 50 {
		if s := get(); s != http.StatusServiceUnavailable {
			t.Fatalf("still wedged: %d", s)
		}
	}
	if probes.Load() != p {
		t.Errorf("%d probes started while one was stuck", probes.Load()-p)
	}
	if g := runtime.NumGoroutine(); g > g0+10 {
		t.Errorf("%d goroutines after 50 checks while wedged (%d before)", g, g0)
	}
	lock.Unlock()
	deadline = time.Now().Add(5 * time.Second)
	for s = get(); s != http.StatusOK && time.Now().Before(deadline); s = get() {
	}
	if s != http.StatusOK {
		t.Fatalf("lock free again: %d", s)
	}

	// a scrape stuck (not on a client) past write timeout + health timeout
	release := make(chan struct{})
	scrape := httptest.NewServer(wd.Track(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release })))
	defer scrape.Close()
	go http.Get(scrape.URL)
	deadline = time.Now().Add(5 * time.Second)
	for s = get(); s == http.StatusOK && time.Now().Before(deadline); s = get() {
		time.Sleep(50 * time.Millisecond)
	}
	close(release)
	if s != http.StatusServiceUnavailable {
		t.Fatalf("scrape stuck past the timeouts: %d, want 503", s)
	}
}

// TestReadinessCheap: a source that is never ready, checked 200 times in
// a burst, is read at most once a second.
func TestReadinessCheap(t *testing.T) {
	var reads atomic.Int32
	rd := &Readiness{Ready: make(chan struct{}), Read: func() { reads.Add(1) }, Every: time.Second}
	srv := httptest.NewServer(rd)
	defer srv.Close()
	began := time.Now()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				resp, err := http.Get(srv.URL)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusServiceUnavailable {
					t.Errorf("not ready: %d", resp.StatusCode)
				}
			}
		}()
	}
	wg.Wait()
	if max := int32(time.Since(began)/time.Second) + 1; reads.Load() > max {
		t.Errorf("%d reads for 200 checks in %v", reads.Load(), time.Since(began))
	}
}

package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/pcp-exporter/pcp-exporter/internal/longtest"
)

// cpuSeconds is the user and system CPU time a process has used
// (/proc/PID/stat, in clock ticks of 1/100 s).
func cpuSeconds(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// the fields after the command name, which is in parentheses
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100
}

// TestFailedLoginFlood: 8 clients sending random passwords to an exporter
// with basic auth (bcrypt cost 10, the htpasswd default) for 6 s (30 s with
// PCPX_LONG_TESTS=1) use under 20% of a core, and the authorised scrapes
// keep their latency. Each random password used to cost a bcrypt check
// (serialised in the toolkit): a core busy, the authorised scrapes waiting.
func TestFailedLoginFlood(t *testing.T) {
	flood := 6 * time.Second
	if longtest.Enabled() {
		flood = 30 * time.Second
	}
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.DefaultCost)
	if err != nil {
		t.Fatal(err)
	}
	webCfg := filepath.Join(t.TempDir(), "web.yml")
	if err := os.WriteFile(webCfg, []byte("basic_auth_users:\n  prom: "+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base, out, proc := demoServe(t, "--web.config.file="+webCfg)
	client := &http.Client{Timeout: 10 * time.Second}
	get := func(user, pass string) (int, time.Duration) {
		req, _ := http.NewRequest("GET", base+"/metrics", nil)
		req.SetBasicAuth(user, pass)
		began := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, time.Since(began)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, time.Since(began)
	}
	median := func(d []time.Duration) time.Duration {
		slices.Sort(d)
		return d[len(d)/2]
	}
	var before []time.Duration
	for i := range 13 {
		code, took := get("prom", "s3cret")
		if code != http.StatusOK {
			t.Fatalf("authorised scrape: status %d\n%s", code, out)
		}
		if i >= 3 {
			before = append(before, took)
		}
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var b [12]byte
			for {
				select {
				case <-stop:
					return
				default:
				}
				rand.Read(b[:])
				code, _ := get("prom", hex.EncodeToString(b[:]))
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}
		}()
	}
	cpu0, began := cpuSeconds(t, proc.Pid), time.Now()
	var during []time.Duration
	for time.Since(began) < flood {
		time.Sleep(250 * time.Millisecond)
		code, took := get("prom", "s3cret")
		if code != http.StatusOK {
			t.Errorf("authorised scrape during the flood: status %d", code)
		}
		during = append(during, took)
	}
	cpu := (cpuSeconds(t, proc.Pid) - cpu0) / time.Since(began).Seconds()
	close(stop)
	wg.Wait()
	mb, md := median(before), median(during)
	t.Logf("flood of %v: exporter CPU %.1f%% of a core; answers %v; authorised scrapes: median %v before, %v during (max %v)",
		flood, 100*cpu, codes, mb, md, during[len(during)-1])
	if codes[http.StatusOK] > 0 {
		t.Errorf("%d random passwords accepted", codes[http.StatusOK])
	}
	// each 401 is a password checked with bcrypt (a 429 is one refused
	// unchecked): on a machine too busy to give the old code the core it
	// would burn, the rate of checks still shows it
	if perSec := float64(codes[http.StatusUnauthorized]) / flood.Seconds(); perSec > 3 {
		t.Errorf("%.1f random passwords checked per second, want at most 3", perSec)
	}
	// the race detector makes bcrypt and the demo's replay several times
	// dearer: the CPU figure means nothing there (the rate above still holds)
	if cpu > 0.20 && !raceEnabled {
		t.Errorf("exporter CPU %.1f%% of a core during the flood, want < 20%%", 100*cpu)
	}
	if md > 2*mb+50*time.Millisecond {
		t.Errorf("authorised scrapes: median %v during the flood, %v before", md, mb)
	}
	if n := strings.Count(out.String(), "failed login"); n > int(flood/(10*time.Second))+2 {
		t.Errorf("%d failed-login lines in %v, want one per 10 s", n, flood)
	}
}

// TestLoginVerdictsFollowWebConfig: the verdicts the login guard remembers
// are forgotten when the web config file changes: a password refused
// before it was configured is accepted after, the replaced one refused.
func TestLoginVerdictsFollowWebConfig(t *testing.T) {
	t.Parallel()
	webCfg := filepath.Join(t.TempDir(), "web.yml")
	setPassword := func(pass string) {
		hash, err := bcrypt.GenerateFromPassword([]byte(pass), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(webCfg, []byte("basic_auth_users:\n  prom: "+string(hash)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	setPassword("old")
	base, out, _ := demoServe(t, "--web.config.file="+webCfg)
	client := &http.Client{Timeout: 10 * time.Second}
	get := func(pass string) int {
		req, _ := http.NewRequest("GET", base+"/-/healthy", nil)
		req.SetBasicAuth("prom", pass)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if a, b := get("old"), get("new"); a != http.StatusOK || b != http.StatusUnauthorized {
		t.Fatalf("before: old %d, new %d; want 200, 401\n%s", a, b, out)
	}
	setPassword("new")
	// the guard stats the file at most every 100 ms, and checks at most 3
	// new passwords at once, then 1 per second, per client
	time.Sleep(1100 * time.Millisecond)
	a := get("old")
	time.Sleep(1100 * time.Millisecond)
	if b := get("new"); a != http.StatusUnauthorized || b != http.StatusOK {
		t.Errorf("after the change: old %d, new %d; want 401, 200", a, b)
	}
}

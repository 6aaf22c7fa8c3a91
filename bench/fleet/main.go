// Command fleet is the fleet benchmark of /probe (bench/fleet/run.sh):
//
//	fleet record -pmcd HOST:PORT -o FILE -- CLIENT ARGS...
//	    runs CLIENT (pcp-exporter fetch, pminfo, ...) against a recording
//	    proxy in front of the real pmcd; every request's answer is kept,
//	    keyed by the request's bytes (its "from" field zeroed)
//	fleet sim -f FILE -n N -addr 127.0.2.1 -port 45000 [-same]
//	    serves the recorded answers as N pmcds, one per loopback address
//	    from -addr on (same port): greeting, then the recorded answer of
//	    each request (an unknown request: ERROR PM_ERR_IPC, counted); each
//	    pmcd's context labels have a machineid of its own (-same: the
//	    recorded one), as the hosts of a fleet do
//	fleet load -url URL -n N -addr 127.0.2.1 -port 45000 -every 15s -for 10m
//	    probes the N targets each every -every, spread evenly, and prints
//	    the probes answered, failed, and latency percentiles
package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// recording is pmcd's greeting and its answer to each request.
type recording struct {
	Greeting []byte
	Answers  map[string][]byte
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: fleet record|sim|load ...")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "record":
		err = record(os.Args[2:])
	case "sim":
		err = sim(os.Args[2:])
	case "load":
		err = load(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
}

func readPDU(r io.Reader) ([]byte, error) {
	h := make([]byte, 12)
	if _, err := io.ReadFull(r, h); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(h)
	if n < 12 || n > 64<<20 {
		return nil, fmt.Errorf("PDU length %d", n)
	}
	b := make([]byte, n)
	copy(b, h)
	_, err := io.ReadFull(r, b[12:])
	return b, err
}

func key(req []byte) string {
	k := slices.Clone(req)
	binary.BigEndian.PutUint32(k[8:], 0)
	// a fetch's context number: libpcp clients (pmproxy) number their
	// contexts, and the answer does not depend on it
	if t := binary.BigEndian.Uint32(k[4:]); (t == 0x7003 || t == 0x7014) && len(k) >= 16 {
		binary.BigEndian.PutUint32(k[12:], 0)
	}
	return string(k)
}

// answered says whether pmcd answers a request of this type (CREDS and
// PROFILE have no answer).
func answered(req []byte) bool {
	t := binary.BigEndian.Uint32(req[4:])
	return t != 0x700c && t != 0x7002
}

func record(args []string) error {
	fs := flag.NewFlagSet("record", flag.ExitOnError)
	pmcd := fs.String("pmcd", "127.0.0.1:44321", "pmcd to record")
	out := fs.String("o", "fleet.rec", "recording")
	fs.Parse(args)
	rec := &recording{Answers: map[string][]byte{}}
	if f, err := os.Open(*out); err == nil {
		gob.NewDecoder(f).Decode(rec)
		f.Close()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				p, err := net.Dial("tcp", *pmcd)
				if err != nil {
					return
				}
				defer p.Close()
				queue := make(chan string, 1<<16)
				go func() {
					for {
						req, err := readPDU(c)
						if err != nil {
							p.Close()
							close(queue)
							return
						}
						if answered(req) {
							queue <- key(req)
						}
						p.Write(req)
					}
				}()
				pr := bufio.NewReader(p)
				g, err := readPDU(pr)
				if err != nil {
					return
				}
				mu.Lock()
				rec.Greeting = g
				mu.Unlock()
				c.Write(g)
				for {
					ans, err := readPDU(pr)
					if err != nil {
						return
					}
					k, ok := <-queue
					if !ok {
						return
					}
					mu.Lock()
					rec.Answers[k] = ans
					mu.Unlock()
					c.Write(ans)
				}
			}()
		}
	}()
	client := fs.Args()
	if len(client) == 0 {
		return errors.New("no client command after --")
	}
	for i, a := range client {
		client[i] = replaceAll(a, "PROXY", ln.Addr().String())
	}
	cmd := exec.Command(client[0], client[1:]...)
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%v: %v", client, err)
	}
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Fprintf(os.Stderr, "recorded %d answers\n", len(rec.Answers))
	return gob.NewEncoder(f).Encode(rec)
}

func replaceAll(s, old, new string) string {
	for {
		i := indexOf(s, old)
		if i < 0 {
			return s
		}
		s = s[:i] + new + s[i+len(old):]
	}
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

func addrs(first string, port, n int) ([]string, error) {
	a, err := netip.ParseAddr(first)
	if err != nil {
		return nil, err
	}
	out := make([]string, n)
	for i := range out {
		out[i] = netip.AddrPortFrom(a, uint16(port)).String()
		a = a.Next()
		if !a.IsLoopback() || a == netip.MustParseAddr("127.0.0.1") {
			return nil, fmt.Errorf("address %v is not a loopback other than 127.0.0.1", a)
		}
	}
	return out, nil
}

func sim(args []string) error {
	fs := flag.NewFlagSet("sim", flag.ExitOnError)
	file := fs.String("f", "fleet.rec", "recording")
	n := fs.Int("n", 1000, "pmcds")
	first := fs.String("addr", "127.0.2.1", "first address")
	port := fs.Int("port", 45000, "port")
	same := fs.Bool("same", false, "every pmcd with the recorded machineid (else each its own: the last 8 hex digits are its number)")
	fs.Parse(args)
	f, err := os.Open(*file)
	if err != nil {
		return err
	}
	var rec recording
	if err := gob.NewDecoder(f).Decode(&rec); err != nil {
		return err
	}
	f.Close()
	as, err := addrs(*first, *port, *n)
	if err != nil {
		return err
	}
	var conns, misses atomic.Int64
	ipcErr := []byte{0, 0, 0, 16, 0, 0, 0x70, 0, 0, 0, 0, 0, 0xff, 0xff, 0xcf, 0xb2} // PM_ERR_IPC
	marker := []byte(`"machineid":"`)
	for i, a := range as {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			return err
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				conns.Add(1)
				go func() {
					defer c.Close()
					c.Write(rec.Greeting)
					r := bufio.NewReader(c)
					w := bufio.NewWriter(c)
					for {
						req, err := readPDU(r)
						if err != nil {
							return
						}
						if answered(req) {
							if ans, ok := rec.Answers[key(req)]; ok {
								// the context labels: each pmcd a host of its own
								if at := bytes.Index(ans, marker); at >= 0 && !*same && at+len(marker)+32 <= len(ans) {
									ans = slices.Clone(ans)
									copy(ans[at+len(marker)+24:], fmt.Sprintf("%08x", i))
								}
								w.Write(ans)
							} else {
								misses.Add(1)
								w.Write(ipcErr)
							}
						}
						if r.Buffered() == 0 {
							w.Flush()
						}
					}
				}()
			}
		}()
	}
	fmt.Fprintf(os.Stderr, "serving %d pmcds on %s..%s (%d answers)\n", *n, as[0], as[len(as)-1], len(rec.Answers))
	for range time.Tick(10 * time.Second) {
		fmt.Fprintf(os.Stderr, "sim: %d connections, %d unknown requests\n", conns.Load(), misses.Load())
	}
	return nil
}

func load(args []string) error {
	fs := flag.NewFlagSet("load", flag.ExitOnError)
	url := fs.String("url", "http://127.0.0.1:9464/probe?module=default&target=", "probe URL, the target appended")
	n := fs.Int("n", 1000, "targets")
	first := fs.String("addr", "127.0.2.1", "first address")
	port := fs.Int("port", 45000, "port")
	every := fs.Duration("every", 15*time.Second, "interval of each target")
	dur := fs.Duration("for", 10*time.Minute, "duration")
	timeout := fs.Float64("timeout", 10, "X-Prometheus-Scrape-Timeout-Seconds")
	expect := fs.String("expect", "\npcp_probe_success 1\n", "text of an answered probe (a whole line: the HELP text of pcp_probe_success has \"pcp_probe_success 1\" in it)")
	fs.Parse(args)
	as, err := addrs(*first, *port, *n)
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: time.Duration(*timeout*float64(time.Second)) + time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	var mu sync.Mutex
	// each target's first probe reads its metadata: counted apart
	var initial, later tally
	var byMinute [][2]int // probes started in each minute, and of them not answered
	var wg sync.WaitGroup
	begin := time.Now()
	end := begin.Add(*dur)
	gap := *every / time.Duration(*n)
	for i, a := range as {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * gap)
			st := &initial
			for t := time.Now(); t.Before(end); t = t.Add(*every) {
				time.Sleep(time.Until(t))
				req, _ := http.NewRequest("GET", *url+a, nil)
				req.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", fmt.Sprint(*timeout))
				start := time.Now()
				resp, err := client.Do(req)
				var body []byte
				if err == nil {
					body, _ = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				d := time.Since(start)
				mu.Lock()
				m := int(start.Sub(begin) / time.Minute)
				for len(byMinute) <= m {
					byMinute = append(byMinute, [2]int{})
				}
				byMinute[m][0]++
				if err != nil || resp.StatusCode != 200 || indexOf(string(body), *expect) < 0 {
					byMinute[m][1]++
				}
				switch {
				case err != nil:
					st.add("client: "+errKind(err), 1)
				case resp.StatusCode != 200:
					st.add(fmt.Sprintf("HTTP %d: %.60s", resp.StatusCode, body), 1)
				case indexOf(string(body), *expect) >= 0:
					st.lat = append(st.lat, d)
				default:
					st.failed++
				}
				mu.Unlock()
				st = &later
			}
		}()
	}
	wg.Wait()
	var all tally
	for _, t := range []*tally{&initial, &later} {
		all.lat = append(all.lat, t.lat...)
		all.failed += t.failed
		for w, n := range t.why {
			all.add(w, n)
		}
	}
	all.print("all probes: ")
	initial.print("first probe of each target: ")
	later.print("later probes: ")
	fmt.Print("not answered by minute of the run:")
	for m, c := range byMinute {
		fmt.Printf(" %d: %d/%d", m, c[1], c[0])
	}
	fmt.Println()
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		fmt.Printf("load generator CPU %.3f cores\n", cpu.Seconds()/time.Since(begin).Seconds())
	}
	return nil
}

// tally counts probes: answered (their latencies), pcp_probe_success 0,
// and HTTP errors by cause.
type tally struct {
	lat    []time.Duration
	failed int
	why    map[string]int
}

func (t *tally) add(why string, n int) {
	if t.why == nil {
		t.why = map[string]int{}
	}
	t.why[why] += n
}

func (t *tally) print(what string) {
	slices.Sort(t.lat)
	pct := func(p float64) time.Duration {
		if len(t.lat) == 0 {
			return 0
		}
		return t.lat[int(p*float64(len(t.lat)-1))].Round(time.Microsecond)
	}
	errs := 0
	for _, n := range t.why {
		errs += n
	}
	fmt.Printf("%sprobes: %d succeeded, %d pcp_probe_success 0, %d HTTP errors; latency p50 %v p90 %v p99 %v max %v\n",
		what, len(t.lat), t.failed, errs, pct(.5), pct(.9), pct(.99), pct(1))
	for _, w := range slices.Sorted(maps.Keys(t.why)) {
		fmt.Printf("  %d %q\n", t.why[w], w)
	}
}

// errKind names a client error briefly (a timeout, a refused connection).
func errKind(err error) string {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	e := err.Error() // without the URL, which names the target
	if i := strings.LastIndex(e, ": "); i >= 0 {
		e = e[i+2:]
	}
	return e
}

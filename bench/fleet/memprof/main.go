// Command memprof measures the live heap of /probe per pooled target: it
// probes N targets of a running `fleet sim` in process (probe.Handler over
// the --pmcd.config file -cfg, the default mapping), ROUNDS times each,
// and prints the heap in use after a garbage collection, less the heap
// before, per target; -prof writes a heap profile (go tool pprof).
//
//	go run ./bench/fleet/memprof -cfg pmcd.yml -n 200 -addr 127.77.0.1 -port 46430
package main

import (
	"flag"
	"fmt"
	"net/http/httptest"
	"net/netip"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/probe"
)

func main() {
	n := flag.Int("n", 100, "targets")
	cfgFile := flag.String("cfg", "pmcd.yml", "--pmcd.config file (bench/fleet/run.sh's)")
	first := flag.String("addr", "127.0.2.1", "first simulated pmcd's address")
	port := flag.Int("port", 45000, "simulated pmcds' port")
	prof := flag.String("prof", "", "heap profile to write")
	rounds := flag.Int("rounds", 2, "probes of each target")
	cpuprof := flag.String("cpuprof", "", "CPU profile of the probes to write")
	flag.Parse()
	cfg, err := probe.Load(*cfgFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "memprof:", err)
		os.Exit(1)
	}
	m, err := mapping.New(nil, mapping.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "memprof:", err)
		os.Exit(1)
	}
	h := probe.New(cfg, m, nil)
	a, err := netip.ParseAddr(*first)
	if err != nil {
		fmt.Fprintln(os.Stderr, "memprof:", err)
		os.Exit(1)
	}
	var targets []string
	for i := 0; i < *n; i++ {
		targets = append(targets, netip.AddrPortFrom(a, uint16(*port)).String())
		a = a.Next()
	}
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	h0 := heap()
	if *cpuprof != "" {
		f, err := os.Create(*cpuprof)
		if err != nil {
			fmt.Fprintln(os.Stderr, "memprof:", err)
			os.Exit(1)
		}
		pprof.StartCPUProfile(f)
		defer f.Close()
	}
	t0 := time.Now()
	var ru0 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	var mu sync.Mutex
	fails := 0
	for r := 0; r < *rounds; r++ {
		var wg sync.WaitGroup
		ch := make(chan string)
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for t := range ch {
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, httptest.NewRequest("GET", "/probe?target="+t, nil))
					if !strings.Contains(rec.Body.String(), "\npcp_probe_success 1\n") {
						mu.Lock()
						fails++
						mu.Unlock()
					}
				}
			}()
		}
		for _, t := range targets {
			ch <- t
		}
		close(ch)
		wg.Wait()
	}
	pprof.StopCPUProfile()
	var ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	fmt.Printf("%d probes in %v, CPU %v (%v per probe)\n", *n**rounds, time.Since(t0).Round(time.Millisecond), cpu.Round(time.Millisecond), (cpu / time.Duration(*n**rounds)).Round(time.Microsecond))
	h1 := heap()
	fmt.Printf("%d targets, %d probes failed: heap %d KiB, %d KiB per target\n", *n, fails, (h1-h0)>>10, (h1-h0)>>10/uint64(*n))
	if *prof != "" {
		f, err := os.Create(*prof)
		if err == nil {
			pprof.WriteHeapProfile(f)
			f.Close()
		}
	}
	runtime.KeepAlive(h)
}

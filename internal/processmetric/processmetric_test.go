package processmetric

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/procfs"
)

// TestParseMatchesProcfs parses each process of testdata/proc (a /proc
// tree: a command holding parentheses and spaces, a netstat without
// OutOctets, a truncated stat and a netstat without IpExt) as procfs, the
// parser client_golang's collector uses, parses it: the same values, and
// a refusal where procfs refuses.
func TestParseMatchesProcfs(t *testing.T) {
	fs, err := procfs.NewFS("testdata/proc")
	if err != nil {
		t.Fatal(err)
	}
	sys, err := fs.Stat()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("testdata/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	if bt, ok := ParseBootTime(b); !ok || bt != sys.BootTime {
		t.Errorf("btime %d %v, procfs %d", bt, ok, sys.BootTime)
	}
	for _, pid := range []int{100, 200, 300} {
		p, err := fs.Proc(pid)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join("testdata/proc", strconv.Itoa(pid))
		b, err := os.ReadFile(filepath.Join(dir, "stat"))
		if err != nil {
			t.Fatal(err)
		}
		st, ok := ParseStat(b)
		want, werr := p.Stat()
		if ok != (werr == nil) {
			t.Errorf("%d/stat: ok %v, procfs %v", pid, ok, werr)
		} else if ok {
			if got := (Stat{UTime: uint64(want.UTime), STime: uint64(want.STime), StartTime: want.Starttime, VSize: uint64(want.VSize), RSS: uint64(want.RSS)}); st != got {
				t.Errorf("%d/stat: %+v, procfs %+v", pid, st, got)
			}
		}
		if b, err = os.ReadFile(filepath.Join(dir, "net/netstat")); err != nil {
			t.Fatal(err)
		}
		in, out, ok := ParseNetstat(b)
		ns, nerr := p.Netstat()
		if nerr != nil {
			t.Fatalf("%d/net/netstat: procfs: %v", pid, nerr)
		}
		wantOK := ns.InOctets != nil || ns.OutOctets != nil
		if ok != wantOK {
			t.Errorf("%d/net/netstat: ok %v, procfs has IpExt %v", pid, ok, wantOK)
		}
		if wi, wo := deref(ns.InOctets), deref(ns.OutOctets); in != wi || out != wo {
			t.Errorf("%d/net/netstat: in %v out %v, procfs %v %v", pid, in, out, wi, wo)
		}
	}
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

// TestMatchesClientGolang gathers this process's metrics from the
// Collector, from client_golang's process collector, and from the
// Collector again: the same families (names, help, types), the same
// constant values, each counter of client_golang's between the Collector's
// two readings, and each gauge within a small slack of them.
func TestMatchesClientGolang(t *testing.T) {
	ours := prometheus.NewPedanticRegistry()
	ours.MustRegister(New())
	theirs := prometheus.NewPedanticRegistry()
	theirs.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{ReportErrors: true}))
	gather := func(g prometheus.Gatherer) map[string]*dto.MetricFamily {
		mfs, err := g.Gather()
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]*dto.MetricFamily{}
		for _, mf := range mfs {
			m[mf.GetName()] = mf
		}
		return m
	}
	a, want, b := gather(ours), gather(theirs), gather(ours)
	if len(want) != 9 {
		t.Fatalf("client_golang gave %d families, want 9", len(want))
	}
	value := func(mf *dto.MetricFamily) float64 {
		m := mf.GetMetric()[0]
		if m.GetCounter() != nil {
			return m.GetCounter().GetValue()
		}
		return m.GetGauge().GetValue()
	}
	for name, w := range want {
		g1, g2 := a[name], b[name]
		if g1 == nil || g2 == nil {
			t.Errorf("%s: missing", name)
			continue
		}
		if g1.GetHelp() != w.GetHelp() || g1.GetType() != w.GetType() || len(g1.GetMetric()) != 1 || len(g1.GetMetric()[0].GetLabel()) != 0 {
			t.Errorf("%s: help %q type %v, client_golang %q %v", name, g1.GetHelp(), g1.GetType(), w.GetHelp(), w.GetType())
			continue
		}
		v1, v2, wv := value(g1), value(g2), value(w)
		var slack float64
		switch name {
		case "process_start_time_seconds", "process_max_fds", "process_virtual_memory_max_bytes":
			if v1 != wv || v2 != wv {
				t.Errorf("%s: %v and %v, client_golang %v", name, v1, v2, wv)
			}
			continue
		case "process_open_fds":
			slack = 2
		case "process_virtual_memory_bytes", "process_resident_memory_bytes":
			slack = wv / 8
		}
		if lo, hi := min(v1, v2)-slack, max(v1, v2)+slack; wv < lo || wv > hi {
			t.Errorf("%s: client_golang %v outside [%v, %v] (the Collector's readings before and after, with %v of slack)", name, wv, lo, hi, slack)
		}
	}
	for name := range a {
		if want[name] == nil {
			t.Errorf("%s: not client_golang's", name)
		}
	}
}

// TestReadsAfresh: the files kept open from gather to gather give what
// the process did in between (CPU spent, bytes sent over loopback), not
// what the first read found.
func TestReadsAfresh(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(New())
	gather := func() map[string]float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]float64{}
		for _, mf := range mfs {
			mt := mf.GetMetric()[0]
			m[mf.GetName()] = mt.GetCounter().GetValue() + mt.GetGauge().GetValue()
		}
		return m
	}
	before := gather()
	// 0.2 s of this process's CPU (the clock ticks in hundredths), however
	// loaded the machine
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	for start, x := cpu(), 0; cpu()-start < 200*time.Millisecond; x++ {
		if x == -1 {
			t.Log(x)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const sent = 1 << 20
	received := make(chan int64)
	go func() {
		var n int64
		if c, err := ln.Accept(); err == nil {
			n, _ = io.Copy(io.Discard, c)
			c.Close()
		}
		received <- n
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Write(make([]byte, sent))
	c.Close()
	// every byte received: sent, not still in the socket's buffer
	if n := <-received; n != sent {
		t.Fatalf("received %d bytes of %d", n, sent)
	}
	after := gather()
	if d := after["process_cpu_seconds_total"] - before["process_cpu_seconds_total"]; d < 0.1 {
		t.Errorf("process_cpu_seconds_total grew by %v over 0.2 s of CPU", d)
	}
	if d := after["process_network_transmit_bytes_total"] - before["process_network_transmit_bytes_total"]; d < sent {
		t.Errorf("process_network_transmit_bytes_total grew by %v after %d bytes sent", d, sent)
	}
}

// BenchmarkGather is one scrape's process metrics, gathered and encoded
// as OpenMetrics: the Collector against client_golang's process collector.
func BenchmarkGather(b *testing.B) {
	for _, c := range []struct {
		name string
		c    prometheus.Collector
	}{
		{"processmetric", New()},
		{"client_golang", collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})},
	} {
		b.Run(c.name, func(b *testing.B) {
			reg := prometheus.NewRegistry()
			reg.MustRegister(c.c)
			b.ReportAllocs()
			for b.Loop() {
				mfs, err := reg.Gather()
				if err != nil {
					b.Fatal(err)
				}
				enc := expfmt.NewEncoder(io.Discard, expfmt.NewFormat(expfmt.TypeOpenMetrics))
				for _, mf := range mfs {
					enc.Encode(mf)
				}
			}
		})
	}
}

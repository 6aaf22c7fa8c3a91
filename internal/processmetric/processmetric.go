// Package processmetric collects the exporter's own process metrics, the
// nine client_golang's process collector gives on Linux (the same names,
// help, types and values: process_cpu_seconds_total, process_open_fds,
// process_max_fds, process_virtual_memory_bytes,
// process_virtual_memory_max_bytes, process_resident_memory_bytes,
// process_start_time_seconds, process_network_receive_bytes_total,
// process_network_transmit_bytes_total), read at a fraction of its cost:
// at every scrape it reads /proc/self/stat and /proc/self/net/netstat, each
// from the start of a descriptor it keeps open (one pread, which procfs
// answers afresh), into a buffer it keeps, the size of /proc/self/fd, and
// the limits from getrlimit; the start time, which never changes, is read
// once. (client_golang's procfs parsing took 1 ms a scrape on an idle
// exporter, most of the exporter's self-metrics' time.) A file that cannot
// be read or parsed leaves its metrics out, as client_golang's collector
// does by default.
package processmetric

import (
	"bytes"
	"io"
	"math"
	"os"
	"strconv"
	"sync"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
)

// userHZ is the unit of the clock ticks /proc/<pid>/stat counts in
// (USER_HZ, 100 on every Linux architecture Go supports).
const userHZ = 100

// Collector is a prometheus.Collector of the process metrics of this
// process.
type Collector struct {
	cpu, openFDs, maxFDs, vsize, maxVsize, rss, start, in, out *prometheus.Desc

	mu            sync.Mutex
	stat, netstat procFile
	buf           []byte
	started       float64 // seconds since the epoch; 0 until read
}

// procFile is a /proc file kept open from read to read.
type procFile struct {
	path string
	f    *os.File // nil until opened, and after an error
}

// read reads the file whole into b (reused), from its start.
func (p *procFile) read(b []byte) ([]byte, error) {
	if p.f == nil {
		f, err := os.Open(p.path)
		if err != nil {
			return b, err
		}
		p.f = f
	}
	for {
		n, err := p.f.ReadAt(b[:cap(b)], 0)
		if err == io.EOF {
			return b[:n], nil
		}
		if err != nil {
			p.f.Close()
			p.f = nil
			return b, err
		}
		// filled: read it again into a larger buffer
		b = make([]byte, 0, 2*cap(b))
	}
}

// New returns a Collector of this process's metrics.
func New() *Collector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &Collector{
		cpu:      d("process_cpu_seconds_total", "Total user and system CPU time spent in seconds."),
		openFDs:  d("process_open_fds", "Number of open file descriptors."),
		maxFDs:   d("process_max_fds", "Maximum number of open file descriptors."),
		vsize:    d("process_virtual_memory_bytes", "Virtual memory size in bytes."),
		maxVsize: d("process_virtual_memory_max_bytes", "Maximum amount of virtual memory available in bytes."),
		rss:      d("process_resident_memory_bytes", "Resident memory size in bytes."),
		start:    d("process_start_time_seconds", "Start time of the process since unix epoch in seconds."),
		in:       d("process_network_receive_bytes_total", "Number of bytes received by the process over the network."),
		out:      d("process_network_transmit_bytes_total", "Number of bytes sent by the process over the network."),
		stat:     procFile{path: "/proc/self/stat"},
		netstat:  procFile{path: "/proc/self/net/netstat"},
		buf:      make([]byte, 0, 8<<10),
	}
}

// Describe sends the nine descriptors.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.cpu, c.openFDs, c.maxFDs, c.vsize, c.maxVsize, c.rss, c.start, c.in, c.out} {
		ch <- d
	}
}

// Collect reads the process's metrics and sends those it could read.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var err error
	if c.buf, err = c.stat.read(c.buf); err == nil {
		if st, ok := ParseStat(c.buf); ok {
			ch <- prometheus.MustNewConstMetric(c.cpu, prometheus.CounterValue, float64(st.UTime+st.STime)/userHZ)
			ch <- prometheus.MustNewConstMetric(c.vsize, prometheus.GaugeValue, float64(st.VSize))
			ch <- prometheus.MustNewConstMetric(c.rss, prometheus.GaugeValue, float64(st.RSS*uint64(os.Getpagesize())))
			if c.started == 0 {
				c.started = startTime(st)
			}
			if c.started != 0 {
				ch <- prometheus.MustNewConstMetric(c.start, prometheus.GaugeValue, c.started)
			}
		}
	}
	if n, err := openFDs(); err == nil {
		ch <- prometheus.MustNewConstMetric(c.openFDs, prometheus.GaugeValue, float64(n))
	}
	var fds, as syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &fds) == nil && syscall.Getrlimit(syscall.RLIMIT_AS, &as) == nil {
		ch <- prometheus.MustNewConstMetric(c.maxFDs, prometheus.GaugeValue, float64(fds.Cur))
		ch <- prometheus.MustNewConstMetric(c.maxVsize, prometheus.GaugeValue, float64(as.Cur))
	}
	if c.buf, err = c.netstat.read(c.buf); err == nil {
		if in, out, ok := ParseNetstat(c.buf); ok {
			ch <- prometheus.MustNewConstMetric(c.in, prometheus.CounterValue, in)
			ch <- prometheus.MustNewConstMetric(c.out, prometheus.CounterValue, out)
		}
	}
}

// startTime is the process's start (boot time plus its start in ticks
// since boot), or 0 when /proc/stat cannot be read.
func startTime(st Stat) float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	bt, ok := ParseBootTime(b)
	if !ok {
		return 0
	}
	return float64(bt) + float64(st.StartTime)/userHZ
}

// openFDs counts the process's open file descriptors: the size of
// /proc/self/fd (Linux 6.2 and later), else its entries.
func openFDs() (int, error) {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/self/fd", &st); err == nil && st.Size > 0 {
		return int(st.Size), nil
	}
	f, err := os.Open("/proc/self/fd")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	return len(names), err
}

// Stat is what the collector takes from /proc/<pid>/stat (proc(5)).
type Stat struct {
	UTime, STime uint64 // fields 14 and 15, in clock ticks
	StartTime    uint64 // field 22, clock ticks after boot
	VSize        uint64 // field 23, bytes
	RSS          uint64 // field 24, pages
}

// ParseStat parses /proc/<pid>/stat; ok is false when it is not one.
func ParseStat(b []byte) (st Stat, ok bool) {
	// the command (field 2) is in parentheses and may hold any byte:
	// the fields follow its last ')'
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return st, false
	}
	rest := b[i+1:]
	for field := 3; field <= 24; field++ {
		rest = bytes.TrimLeft(rest, " ")
		j := bytes.IndexAny(rest, " \n")
		if j < 0 {
			j = len(rest)
		}
		if j == 0 {
			return st, false
		}
		var p *uint64
		switch field {
		case 14:
			p = &st.UTime
		case 15:
			p = &st.STime
		case 22:
			p = &st.StartTime
		case 23:
			p = &st.VSize
		case 24:
			p = &st.RSS
		}
		if p != nil {
			if *p, ok = parseUint(rest[:j]); !ok {
				return st, false
			}
		}
		rest = rest[j:]
	}
	return st, true
}

// parseUint parses a decimal number that fits in 64 bits.
func parseUint(b []byte) (uint64, bool) {
	var v uint64
	for _, c := range b {
		d := uint64(c - '0')
		if c < '0' || c > '9' || v > (math.MaxUint64-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, len(b) > 0
}

// ParseBootTime returns the btime of /proc/stat (seconds since the epoch).
func ParseBootTime(b []byte) (uint64, bool) {
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("btime ")); ok {
			return parseUint(bytes.TrimSpace(v))
		}
	}
	return 0, false
}

// ParseNetstat returns IpExt's InOctets and OutOctets of
// /proc/<pid>/net/netstat (pairs of lines: the names, then the values); a
// counter missing from IpExt is 0 (as client_golang gives it). ok is false
// without an IpExt pair, or with a value that is not a number.
func ParseNetstat(b []byte) (in, out float64, ok bool) {
	var names []byte
	for line := range bytes.Lines(b) {
		v, isIP := bytes.CutPrefix(bytes.TrimSuffix(line, []byte("\n")), []byte("IpExt:"))
		if !isIP {
			continue
		}
		if names == nil {
			names = v
			continue
		}
		n, vs := bytes.Fields(names), bytes.Fields(v)
		if len(n) != len(vs) {
			return 0, 0, false
		}
		for k := range n {
			var p *float64
			switch string(n[k]) {
			case "InOctets":
				p = &in
			case "OutOctets":
				p = &out
			default:
				continue
			}
			x, err := strconv.ParseFloat(string(vs[k]), 64)
			if err != nil {
				return 0, 0, false
			}
			*p = x
		}
		return in, out, true
	}
	return 0, 0, false
}

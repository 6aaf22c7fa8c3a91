package mapping

import (
	"strings"
)

// The hostmetrics profile (naming "hostmetrics"): the linux agent's host
// metrics as the OpenTelemetry Collector's hostmetrics receiver gives them
// (collector-contrib v0.161.0, the version of the pinned collector; its
// metadata.yaml files are in testdata/hostmetrics with their origin): the
// same metric names, units, kinds, monotonicity, value types, attribute
// names and attribute values, and the same values where the receiver reads
// the same kernel counter (gopsutil v4.26.8's conversions included, see
// docs/hostmetrics-profile.md). The machinery is the node profile's
// (NodeSource); a metric or attribute PCP has no source for is left out
// and listed in that document, never made up.
//
// Over Prometheus (a scrape, a remote-write backfill) the families are
// named as the collector's Prometheus exporter names them
// (system_cpu_time_seconds_total): one mapping serves every output.

// hostProfile is the hostmetrics naming's table.
var hostProfile = newProfile(hostFamilies, "the OpenTelemetry hostmetrics receiver's metric")

// hostSources are the PCP metrics the table reads.
var hostSources = func() map[string]bool {
	m := map[string]bool{}
	for i := range hostFamilies {
		for _, s := range hostFamilies[i].sources() {
			m[s] = true
		}
	}
	return m
}()

// HostmetricsNames returns the names of the hostmetrics profile's metrics,
// in table order (for documentation and tests).
func HostmetricsNames() []string { return hostProfile.names() }

// instrument kinds of the table
const (
	hmGauge = iota
	hmSum   // a non-monotonic cumulative Sum (an UpDownCounter)
	hmCounter
)

// hostFamily is a row of the table: name, UCUM unit, kind, value type int.
func hostFamily(name, unit string, kind int, integer bool, help string, parts ...nodePart) nodeFamily {
	o := &otelForm{unit: unit, sum: kind != hmGauge, monotonic: kind == hmCounter, integer: integer}
	t := Gauge
	if kind == hmCounter {
		t = Counter
	}
	o.promName = otelPromName(name, unit, kind)
	return nodeFamily{name: name, typ: t, help: help, parts: parts, otel: o}
}

// otelPromName is the Prometheus name the collector's Prometheus exporter
// gives a metric (otlptranslator, with suffixes): dots to underscores, the
// unit's word appended unless an annotation ({thread}), _total for a
// monotonic Sum.
func otelPromName(name, unit string, kind int) string {
	n := strings.NewReplacer(".", "_", "-", "_").Replace(name)
	if w := omUnit(unit); w != "" && !strings.HasSuffix(n, "_"+w) {
		n += "_" + w
	} else if unit == "1" && kind == hmGauge {
		n += "_ratio"
	}
	if kind == hmCounter {
		n += "_total"
	}
	return n
}

// omUnit is the OpenMetrics unit word of a UCUM unit of the table ("" for
// an annotation or none).
func omUnit(ucum string) string {
	switch ucum {
	case "s":
		return "seconds"
	case "By":
		return "bytes"
	case "Hz":
		return "hertz"
	}
	return ""
}

// at gives a part the constant attributes of its series.
func at(p nodePart, kv ...string) nodePart {
	for i := 0; i+1 < len(kv); i += 2 {
		p.consts = append(p.consts, LabelPair{kv[i], kv[i+1]})
	}
	return p
}

// hostFamilies is the profile's table, in the receiver's scraper order
// (cpu, load, memory, disk, filesystem, network, paging, processes,
// system). Attribute values are the receiver's enums.
var hostFamilies = func() []nodeFamily {
	var fs []nodeFamily
	add := func(f ...nodeFamily) { fs = append(fs, f...) }

	// cpu: /proc/stat per CPU; the receiver names a CPU "cpu0" (gopsutil)
	// and reports user with guest time in it, as PCP's user is
	var cpu []nodePart
	for _, m := range [][2]string{{"user", "user"}, {"sys", "system"}, {"idle", "idle"}, {"irq.hard", "interrupt"},
		{"nice", "nice"}, {"irq.soft", "softirq"}, {"steal", "steal"}, {"wait.total", "wait"}} {
		cpu = append(cpu, at(nodePart{pcp: "kernel.percpu.cpu." + m[0], label: "cpu"}, "state", m[1]))
	}
	add(hostFamily("system.cpu.time", "s", hmCounter, false, "Total seconds each logical CPU spent on each mode.", cpu...))
	add(hostFamily("system.cpu.logical.count", "{cpu}", hmSum, true, "Number of available logical CPUs.", nodePart{pcp: "hinv.ncpu"}))

	// load: /proc/loadavg (the decimal it was read from)
	for _, l := range [][3]string{{"1m", "1 minute", "1 minute"}, {"5m", "5 minute", "5 minutes"}, {"15m", "15 minute", "15 minutes"}} {
		add(hostFamily("system.cpu.load_average."+l[0], "{thread}", hmGauge, false, "Average CPU Load over "+l[2]+".",
			nodePart{pcp: "kernel.all.load", inst: l[1], round32: true}))
	}

	// memory: /proc/meminfo as gopsutil reads it: its Cached is Cached +
	// SReclaimable, and the receiver's used is Total - Free - Buffers -
	// that Cached (its default formula, without the MemAvailable gate)
	const sreclaim = "mem.util.slabReclaimable"
	add(hostFamily("system.memory.usage", "By", hmSum, true, "Bytes of memory in use.",
		at(nodePart{pcp: "mem.physmem", terms: []nodeTerm{{"mem.util.free", -1}, {"mem.util.bufmem", -1}, {"mem.util.cached", -1}, {sreclaim, -1}}}, "state", "used"),
		at(nodePart{pcp: "mem.util.free"}, "state", "free"),
		at(nodePart{pcp: "mem.util.bufmem"}, "state", "buffered"),
		at(nodePart{pcp: "mem.util.cached", terms: []nodeTerm{{sreclaim, 1}}}, "state", "cached"),
		at(nodePart{pcp: sreclaim}, "state", "slab_reclaimable"),
		at(nodePart{pcp: "mem.util.slabUnreclaimable"}, "state", "slab_unreclaimable"),
	))
	add(
		hostFamily("system.memory.limit", "By", hmSum, true, "Total bytes of memory available.", nodePart{pcp: "mem.physmem"}),
		hostFamily("system.linux.memory.available", "By", hmSum, true, "An estimate of how much memory is available for starting new applications, without swapping. This is a more accurate alternative than system.memory.usage with state=free. (Linux only)", nodePart{pcp: "mem.util.available"}),
		hostFamily("system.linux.memory.dirty", "By", hmSum, true, "The amount of dirty memory according to `/proc/meminfo`.", nodePart{pcp: "mem.util.dirty"}),
	)

	// disk: /proc/diskstats of whole disks, partitions and md devices by
	// kernel name; bytes are sectors x 512 (as gopsutil), times in seconds
	disk := func(name, unit string, kind int, integer bool, help string, factor float64, fields ...string) nodeFamily {
		var parts []nodePart
		for i, field := range fields {
			for _, tree := range []string{"disk.dev.", "disk.partitions.", "disk.md."} {
				p := nodePart{pcp: tree + field, label: "device", factor: factor}
				if len(fields) == 2 {
					p = at(p, "direction", []string{"read", "write"}[i])
				}
				parts = append(parts, p)
			}
		}
		return hostFamily(name, unit, kind, integer, help, parts...)
	}
	add(
		disk("system.disk.io", "By", hmCounter, true, "Disk bytes transferred.", 512, "blkread", "blkwrite"),
		disk("system.disk.io_time", "s", hmCounter, false, "Time disk spent activated. On Windows, this is calculated as the inverse of disk idle time.", 0, "avactive"),
		disk("system.disk.merged", "{operations}", hmCounter, true, "The number of disk reads/writes merged into single physical disk access operations.", 0, "read_merge", "write_merge"),
		disk("system.disk.operation_time", "s", hmCounter, false, "Time spent in disk operations.", 0, "read_rawactive", "write_rawactive"),
		disk("system.disk.operations", "{operations}", hmCounter, true, "Disk operations count.", 0, "read", "write"),
		disk("system.disk.pending_operations", "{operations}", hmSum, true, "The queue size of pending I/O operations.", 0, "inflight"),
		disk("system.disk.weighted_io_time", "s", hmCounter, false, "Time disk spent activated multiplied by the queue length.", 0, "aveq"),
	)

	// filesystem: statfs of the mounted block devices, as gopsutil's
	// Usage: used (blocks - bfree), free (bavail), reserved (bfree -
	// bavail); no mode or type attribute (PCP reads neither)
	fsys := func(pcp, state string, terms ...nodeTerm) nodePart {
		return at(nodePart{pcp: pcp, label: "device", joins: []nodeJoin{{"mountpoint", "filesys.mountdir"}}, terms: terms}, "state", state)
	}
	add(
		hostFamily("system.filesystem.usage", "By", hmSum, true, "Filesystem bytes used.",
			fsys("filesys.used", "used"), fsys("filesys.avail", "free"), fsys("filesys.free", "reserved", nodeTerm{"filesys.avail", -1})),
		hostFamily("system.filesystem.inodes.usage", "{inodes}", hmSum, true, "FileSystem inodes used.",
			fsys("filesys.usedfiles", "used"), fsys("filesys.freefiles", "free")),
	)

	// network: /proc/net/dev of every interface; TCP connections by state
	// over IPv4 and IPv6 (/proc/net/tcp and tcp6, as gopsutil)
	netdev := func(name, unit, help, in, out string) nodeFamily {
		return hostFamily(name, unit, hmCounter, true, help,
			at(nodePart{pcp: "network.interface." + in, label: "device"}, "direction", "receive"),
			at(nodePart{pcp: "network.interface." + out, label: "device"}, "direction", "transmit"))
	}
	var conns []nodePart
	for _, c := range [][2]string{{"close_wait", "CLOSE_WAIT"}, {"close", "CLOSE"}, {"closing", "CLOSING"}, {"established", "ESTABLISHED"},
		{"fin_wait1", "FIN_WAIT_1"}, {"fin_wait2", "FIN_WAIT_2"}, {"last_ack", "LAST_ACK"}, {"listen", "LISTEN"},
		{"syn_sent", "SYN_SENT"}, {"syn_recv", "SYN_RECV"}, {"time_wait", "TIME_WAIT"}} {
		conns = append(conns, at(nodePart{pcp: "network.tcpconn." + c[0], terms: []nodeTerm{{"network.tcpconn6." + c[0], 1}}}, "protocol", "tcp", "state", c[1]))
	}
	add(
		netdev("system.network.dropped", "{packets}", "The number of packets dropped.", "in.drops", "out.drops"),
		netdev("system.network.errors", "{errors}", "The number of errors encountered.", "in.errors", "out.errors"),
		netdev("system.network.io", "By", "The number of bytes transmitted and received.", "in.bytes", "out.bytes"),
		netdev("system.network.packets", "{packets}", "The number of packets transferred.", "in.packets", "out.packets"),
		hostFamily("system.network.connections", "{connections}", hmSum, true, "The number of connections.", conns...),
		hostFamily("system.network.conntrack.count", "{entries}", hmSum, true, "The count of entries in conntrack table.", nodePart{pcp: "netfilter.ip_conntrack_count"}),
		hostFamily("system.network.conntrack.max", "{entries}", hmSum, true, "The limit for entries in the conntrack table.", nodePart{pcp: "netfilter.ip_conntrack_max"}),
	)

	// paging: /proc/swaps per device; /proc/vmstat counts, which gopsutil
	// v4.26.8 multiplies by 4096 (mem_linux.go: "value * 4 * 1024") and the
	// receiver reports so: the same numbers here
	add(hostFamily("system.paging.usage", "By", hmSum, true, "Swap (unix) or pagefile (windows) usage.",
		at(nodePart{pcp: "swapdev.length", label: "device", terms: []nodeTerm{{"swapdev.free", -1}}}, "state", "used"),
		at(nodePart{pcp: "swapdev.free", label: "device"}, "state", "free"),
	))
	const page = 4096
	add(hostFamily("system.paging.operations", "{operations}", hmCounter, true, "The number of paging operations.",
		at(nodePart{pcp: "mem.vmstat.pswpin", factor: page}, "direction", "page_in", "type", "major"),
		at(nodePart{pcp: "mem.vmstat.pswpout", factor: page}, "direction", "page_out", "type", "major"),
		at(nodePart{pcp: "mem.vmstat.pgpgin", factor: page}, "direction", "page_in", "type", "minor"),
		at(nodePart{pcp: "mem.vmstat.pgpgout", factor: page}, "direction", "page_out", "type", "minor"),
	))
	add(hostFamily("system.paging.faults", "{faults}", hmCounter, true, "The number of page faults.",
		at(nodePart{pcp: "mem.vmstat.pgmajfault", factor: page}, "type", "major"),
		at(nodePart{pcp: "mem.vmstat.pgfault", factor: page, terms: []nodeTerm{{"mem.vmstat.pgmajfault", -1}}}, "type", "minor"),
	))

	// processes: /proc/stat's procs_running and procs_blocked (the other
	// states the receiver counts by walking /proc: not given)
	add(hostFamily("system.processes.count", "{processes}", hmSum, true, "Total number of processes in each state.",
		at(nodePart{pcp: "kernel.all.running"}, "status", "running"),
		at(nodePart{pcp: "kernel.all.blocked"}, "status", "blocked"),
	))
	add(hostFamily("system.processes.created", "{processes}", hmCounter, true, "Total number of created processes. Supported on Linux and OpenBSD.", nodePart{pcp: "kernel.all.sysfork"}))

	// system: /proc/uptime (the receiver's sysinfo(2) gives whole seconds)
	add(hostFamily("system.uptime", "s", hmGauge, false, "The time the system has been running", nodePart{pcp: "kernel.all.uptime"}))
	return fs
}()

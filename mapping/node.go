package mapping

import (
	"strings"
)

// The node profile (naming "node"): the linux agent's host metrics under
// node_exporter 1.5's family names, types and labels. NodeSource presents
// each family of nodeFamilies as one metric computed from its PCP sources;
// the mapper names those metrics verbatim and labels their series with
// their instances' labels only. Every row is exact: the same kernel
// counter, converted to the same unit (PCP's units convert to base units as
// in the default naming; factor adds what units cannot say, 512 bytes a
// sector). Families PCP cannot give exactly are not here (README, "node
// profile").

// nodeFamily is one family of a profile (a node_exporter family, an OTel
// hostmetrics metric) and the PCP metrics it comes from.
type nodeFamily struct {
	name  string // node_exporter's family, the hostmetrics metric
	typ   Type   // the Prometheus type
	help  string
	parts []nodePart
	// otel is the OpenTelemetry form of a hostmetrics metric (nil: the
	// default one, from typ).
	otel *otelForm
}

// otelForm is a hostmetrics metric's instrument as its metadata.yaml says.
type otelForm struct {
	unit      string // UCUM
	sum       bool   // a cumulative Sum, else a Gauge
	monotonic bool
	integer   bool // value_type int
	promName  string
}

// nodePart is one PCP metric's share of a family.
type nodePart struct {
	pcp string // the value's metric ("" with one or now)
	// inst keeps only this instance (kernel.all.load "1 minute").
	inst string
	// label names the label that carries the instance name, without the
	// prefix trim ("cpu0" is cpu="0").
	label, trim string
	// consts are labels of every series of the part (mode="user").
	consts []LabelPair
	// joins are labels whose value is another metric's value for the
	// instance of the same name, or its only value when singular
	// (mountpoint from filesys.mountdir, the uname strings).
	joins []nodeJoin
	// factor multiplies the value beyond the unit conversion (0: 1).
	factor float64
	// mulBy multiplies by a singular metric's value (hinv.pagesize).
	mulBy string
	// one is the value 1 of an info family; now is the fetch's time.
	one, now bool
	// round32 gives a FLOAT value as the decimal it was read from (0.52,
	// not 0.519999980926514): the shortest form that is the same float32.
	round32 bool
	// terms are other metrics' values added (sign 1) or subtracted (-1),
	// for the same instance or singular, in their base unit times factor
	// (cached memory is Cached + SReclaimable).
	terms []nodeTerm
}

type nodeTerm struct {
	pcp  string
	sign float64
}

type nodeJoin struct{ label, pcp string }

func nodeSimple(name string, t Type, pcp, help string) nodeFamily {
	return nodeFamily{name: name, typ: t, help: help, parts: []nodePart{{pcp: pcp}}}
}

func nodePerInst(name string, t Type, label, help string, pcps ...string) nodeFamily {
	f := nodeFamily{name: name, typ: t, help: help}
	for _, p := range pcps {
		f.parts = append(f.parts, nodePart{pcp: p, label: label})
	}
	return f
}

// nodeFamilies is the profile's table, in node_exporter's collector order.
var nodeFamilies = func() []nodeFamily {
	var fs []nodeFamily
	add := func(f ...nodeFamily) { fs = append(fs, f...) }

	// cpu: /proc/stat per-CPU ticks (PCP milliseconds, node_exporter
	// USER_HZ ticks: the same seconds)
	cpu := nodeFamily{name: "node_cpu_seconds_total", typ: Counter, help: "Seconds the CPUs spent in each mode."}
	for _, m := range [][2]string{{"idle", "idle"}, {"wait.total", "iowait"}, {"irq.hard", "irq"}, {"nice", "nice"}, {"irq.soft", "softirq"}, {"steal", "steal"}, {"sys", "system"}, {"user", "user"}} {
		cpu.parts = append(cpu.parts, nodePart{pcp: "kernel.percpu.cpu." + m[0], label: "cpu", trim: "cpu", consts: []LabelPair{{"mode", m[1]}}})
	}
	guest := nodeFamily{name: "node_cpu_guest_seconds_total", typ: Counter, help: "Seconds the CPUs spent in guests (VMs) for each mode."}
	for _, m := range [][2]string{{"guest_nice", "nice"}, {"guest", "user"}} {
		guest.parts = append(guest.parts, nodePart{pcp: "kernel.percpu.cpu." + m[0], label: "cpu", trim: "cpu", consts: []LabelPair{{"mode", m[1]}}})
	}
	add(cpu, guest)

	// loadavg
	for _, l := range [][2]string{{"1", "1 minute"}, {"5", "5 minute"}, {"15", "15 minute"}} {
		add(nodeFamily{name: "node_load" + l[0], typ: Gauge, help: l[0] + "m load average.", parts: []nodePart{{pcp: "kernel.all.load", inst: l[1], round32: true}}})
	}

	// meminfo: /proc/meminfo in kB (PCP Kbyte), HugePages_* counts
	add(nodeSimple("node_memory_MemTotal_bytes", Gauge, "mem.physmem", "Memory information field MemTotal_bytes."))
	for _, m := range [][2]string{
		{"MemFree", "free"}, {"MemAvailable", "available"}, {"Buffers", "bufmem"}, {"Cached", "cached"},
		{"SwapCached", "swapCached"}, {"Active", "active"}, {"Inactive", "inactive"},
		{"Active_anon", "active_anon"}, {"Inactive_anon", "inactive_anon"}, {"Active_file", "active_file"},
		{"Inactive_file", "inactive_file"}, {"Unevictable", "unevictable"}, {"Mlocked", "mlocked"},
		{"SwapTotal", "swapTotal"}, {"SwapFree", "swapFree"}, {"Dirty", "dirty"}, {"Writeback", "writeback"},
		{"AnonPages", "anonpages"}, {"Mapped", "mapped"}, {"Shmem", "shmem"}, {"Slab", "slab"},
		{"SReclaimable", "slabReclaimable"}, {"SUnreclaim", "slabUnreclaimable"}, {"KernelStack", "kernelStack"},
		{"PageTables", "pageTables"}, {"NFS_Unstable", "NFS_Unstable"}, {"Bounce", "bounce"},
		{"CommitLimit", "commitLimit"}, {"Committed_AS", "committed_AS"}, {"VmallocTotal", "vmallocTotal"},
		{"VmallocUsed", "vmallocUsed"}, {"VmallocChunk", "vmallocChunk"}, {"HardwareCorrupted", "corrupthardware"},
		{"AnonHugePages", "anonhugepages"}, {"DirectMap4k", "directMap4k"}, {"DirectMap2M", "directMap2M"},
		{"DirectMap1G", "directMap1G"},
	} {
		add(nodeSimple("node_memory_"+m[0]+"_bytes", Gauge, "mem.util."+m[1], "Memory information field "+m[0]+"_bytes."))
	}
	for _, m := range [][2]string{{"HugePages_Total", "hugepagesTotal"}, {"HugePages_Free", "hugepagesFree"}, {"HugePages_Rsvd", "hugepagesRsvd"}, {"HugePages_Surp", "hugepagesSurp"}} {
		add(nodeSimple("node_memory_"+m[0], Gauge, "mem.util."+m[1], "Memory information field "+m[0]+"."))
	}
	add(nodeSimple("node_memory_Hugepagesize_bytes", Gauge, "hinv.hugepagesize", "Memory information field Hugepagesize_bytes."))

	// diskstats: whole disks (disk.dev, as node_exporter's default device
	// exclusion leaves them) and md devices, by kernel name
	disk := func(name string, t Type, field, help string, factor float64) nodeFamily {
		f := nodePerInst(name, t, "device", help, "disk.dev."+field, "disk.md."+field)
		for i := range f.parts {
			f.parts[i].factor = factor
		}
		return f
	}
	add(
		disk("node_disk_reads_completed_total", Counter, "read", "The total number of reads completed successfully.", 0),
		disk("node_disk_reads_merged_total", Counter, "read_merge", "The total number of reads merged.", 0),
		disk("node_disk_read_bytes_total", Counter, "blkread", "The total number of bytes read successfully.", 512),
		disk("node_disk_read_time_seconds_total", Counter, "read_rawactive", "The total number of seconds spent by all reads.", 0),
		disk("node_disk_writes_completed_total", Counter, "write", "The total number of writes completed successfully.", 0),
		disk("node_disk_writes_merged_total", Counter, "write_merge", "The number of writes merged.", 0),
		disk("node_disk_written_bytes_total", Counter, "blkwrite", "The total number of bytes written successfully.", 512),
		disk("node_disk_write_time_seconds_total", Counter, "write_rawactive", "This is the total number of seconds spent by all writes.", 0),
		disk("node_disk_io_now", Gauge, "inflight", "The number of I/Os currently in progress.", 0),
		disk("node_disk_io_time_seconds_total", Counter, "avactive", "Total seconds spent doing I/Os.", 0),
		disk("node_disk_io_time_weighted_seconds_total", Counter, "aveq", "The weighted # of seconds spent doing I/Os.", 0),
		disk("node_disk_discards_completed_total", Counter, "discard", "The total number of discards completed successfully.", 0),
		disk("node_disk_discards_merged_total", Counter, "discard_merge", "The total number of discards merged.", 0),
		disk("node_disk_discarded_sectors_total", Counter, "blkdiscard", "The total number of sectors discarded successfully.", 0),
		disk("node_disk_discard_time_seconds_total", Counter, "discard_rawactive", "This is the total number of seconds spent by all discards.", 0),
		disk("node_disk_flush_requests_total", Counter, "flush", "The total number of flush requests completed successfully", 0),
		disk("node_disk_flush_requests_time_seconds_total", Counter, "flush_rawactive", "This is the total number of seconds spent by all flush requests.", 0),
	)

	// filesystem: statfs of the mounted block devices (no fstype: PCP has none)
	fsys := func(name, pcp, help string) nodeFamily {
		return nodeFamily{name: name, typ: Gauge, help: help, parts: []nodePart{{pcp: pcp, label: "device", joins: []nodeJoin{{"mountpoint", "filesys.mountdir"}}}}}
	}
	add(
		fsys("node_filesystem_size_bytes", "filesys.capacity", "Filesystem size in bytes."),
		fsys("node_filesystem_free_bytes", "filesys.free", "Filesystem free space in bytes."),
		fsys("node_filesystem_avail_bytes", "filesys.avail", "Filesystem space available to non-root users in bytes."),
		fsys("node_filesystem_files", "filesys.maxfiles", "Filesystem total file nodes."),
		fsys("node_filesystem_files_free", "filesys.freefiles", "Filesystem total free file nodes."),
		fsys("node_filesystem_readonly", "filesys.readonly", "Filesystem read-only status."),
	)

	// netdev: /proc/net/dev
	for _, n := range [][2]string{
		{"receive_bytes", "in.bytes"}, {"receive_packets", "in.packets"}, {"receive_errs", "in.errors"},
		{"receive_drop", "in.drops"}, {"receive_fifo", "in.fifo"}, {"receive_frame", "in.frame"},
		{"receive_compressed", "in.compressed"}, {"receive_multicast", "in.mcasts"},
		{"transmit_bytes", "out.bytes"}, {"transmit_packets", "out.packets"}, {"transmit_errs", "out.errors"},
		{"transmit_drop", "out.drops"}, {"transmit_fifo", "out.fifo"}, {"transmit_colls", "collisions"},
		{"transmit_carrier", "out.carrier"}, {"transmit_compressed", "out.compressed"},
	} {
		add(nodePerInst("node_network_"+n[0]+"_total", Counter, "device", "Network device statistic "+n[0]+".", "network.interface."+n[1]))
	}
	add(nodePerInst("node_network_mtu_bytes", Gauge, "device", "mtu_bytes value of /sys/class/net/<iface>.", "network.interface.mtu"))

	// filefd, stat, entropy, pressure
	add(
		nodeSimple("node_filefd_allocated", Gauge, "vfs.files.count", "File descriptor statistics: allocated."),
		nodeSimple("node_filefd_maximum", Gauge, "vfs.files.max", "File descriptor statistics: maximum."),
		nodeSimple("node_boot_time_seconds", Gauge, "kernel.all.boottime", "Node boot time, in unixtime."),
		nodeSimple("node_context_switches_total", Counter, "kernel.all.pswitch", "Total number of context switches."),
		nodeSimple("node_forks_total", Counter, "kernel.all.sysfork", "Total number of forks."),
		nodeSimple("node_intr_total", Counter, "kernel.all.intr", "Total number of interrupts serviced."),
		nodeSimple("node_procs_blocked", Gauge, "kernel.all.blocked", "Number of processes blocked waiting for I/O to complete."),
		nodeSimple("node_procs_running", Gauge, "kernel.all.running", "Number of processes in runnable state."),
		nodeSimple("node_entropy_available_bits", Gauge, "kernel.all.entropy.avail", "Bits of available entropy."),
		nodeSimple("node_entropy_pool_size_bits", Gauge, "kernel.all.entropy.poolsize", "Bits of entropy pool."),
		nodeSimple("node_pressure_cpu_waiting_seconds_total", Counter, "kernel.all.pressure.cpu.some.total", "Total time in seconds that processes have waited for CPU time"),
		nodeSimple("node_pressure_io_waiting_seconds_total", Counter, "kernel.all.pressure.io.some.total", "Total time in seconds that processes have waited due to IO congestion"),
		nodeSimple("node_pressure_io_stalled_seconds_total", Counter, "kernel.all.pressure.io.full.total", "Total time in seconds no process could make progress due to IO congestion"),
		nodeSimple("node_pressure_memory_waiting_seconds_total", Counter, "kernel.all.pressure.memory.some.total", "Total time in seconds that processes have waited for memory"),
		nodeSimple("node_pressure_memory_stalled_seconds_total", Counter, "kernel.all.pressure.memory.full.total", "Total time in seconds no process could make progress due to memory congestion"),
		nodeSimple("node_pressure_irq_stalled_seconds_total", Counter, "kernel.all.pressure.irq.full.total", "Total time in seconds no process could make progress due to IRQ congestion"),
	)

	// vmstat: node_exporter's default fields (oom_kill|pgpg.*|pswp.*|pg.*fault)
	for _, v := range []string{"oom_kill", "pgfault", "pgmajfault", "pgpgin", "pgpgout", "pswpin", "pswpout"} {
		add(nodeSimple("node_vmstat_"+v, Untyped, "mem.vmstat."+v, "/proc/vmstat information field "+v+"."))
	}

	// netstat: node_exporter's default fields of /proc/net/{netstat,snmp,snmp6}
	for _, n := range [][2]string{
		{"Icmp6_InErrors", "icmp6.inerrors"}, {"Icmp6_InMsgs", "icmp6.inmsgs"}, {"Icmp6_OutMsgs", "icmp6.outmsgs"},
		{"Icmp_InErrors", "icmp.inerrors"}, {"Icmp_InMsgs", "icmp.inmsgs"}, {"Icmp_OutMsgs", "icmp.outmsgs"},
		{"Ip6_InOctets", "ip6.inoctets"}, {"Ip6_OutOctets", "ip6.outoctets"},
		{"IpExt_InOctets", "ip.inoctets"}, {"IpExt_OutOctets", "ip.outoctets"}, {"Ip_Forwarding", "ip.forwarding"},
		{"TcpExt_ListenDrops", "tcp.listendrops"}, {"TcpExt_ListenOverflows", "tcp.listenoverflows"},
		{"TcpExt_SyncookiesFailed", "tcp.syncookiesfailed"}, {"TcpExt_SyncookiesRecv", "tcp.syncookiesrecv"},
		{"TcpExt_SyncookiesSent", "tcp.syncookiessent"}, {"TcpExt_TCPSynRetrans", "tcp.synretrans"},
		{"TcpExt_TCPTimeouts", "tcp.timeouts"}, {"TcpExt_TCPOFOQueue", "tcp.ofoqueue"}, {"TcpExt_TCPRcvQDrop", "tcp.tcprcvqdrop"},
		{"Tcp_ActiveOpens", "tcp.activeopens"}, {"Tcp_CurrEstab", "tcp.currestab"}, {"Tcp_InErrs", "tcp.inerrs"},
		{"Tcp_InSegs", "tcp.insegs"}, {"Tcp_OutRsts", "tcp.outrsts"}, {"Tcp_OutSegs", "tcp.outsegs"},
		{"Tcp_PassiveOpens", "tcp.passiveopens"}, {"Tcp_RetransSegs", "tcp.retranssegs"},
		{"Udp6_InDatagrams", "udp6.indatagrams"}, {"Udp6_InErrors", "udp6.inerrors"}, {"Udp6_NoPorts", "udp6.noports"},
		{"Udp6_OutDatagrams", "udp6.outdatagrams"}, {"Udp6_RcvbufErrors", "udp6.rcvbuferrors"}, {"Udp6_SndbufErrors", "udp6.sndbuferrors"},
		{"UdpLite6_InErrors", "udplite6.inerrors"}, {"UdpLite_InErrors", "udplite.inerrors"},
		{"Udp_InDatagrams", "udp.indatagrams"}, {"Udp_InErrors", "udp.inerrors"}, {"Udp_NoPorts", "udp.noports"},
		{"Udp_OutDatagrams", "udp.outdatagrams"}, {"Udp_RcvbufErrors", "udp.recvbuferrors"}, {"Udp_SndbufErrors", "udp.sndbuferrors"},
	} {
		proto, field, _ := strings.Cut(n[0], "_")
		add(nodeSimple("node_netstat_"+n[0], Untyped, "network."+n[1], "Statistic "+proto+field+"."))
	}

	// sockstat: /proc/net/sockstat{,6}; mem in pages, _mem_bytes in bytes
	for _, s := range [][2]string{
		{"sockets_used", "total"}, {"TCP_inuse", "tcp.inuse"}, {"TCP_orphan", "tcp.orphan"}, {"TCP_tw", "tcp.tw"},
		{"TCP_alloc", "tcp.alloc"}, {"TCP_mem", "tcp.mem"}, {"UDP_inuse", "udp.inuse"}, {"UDP_mem", "udp.mem"},
		{"UDPLITE_inuse", "udplite.inuse"}, {"RAW_inuse", "raw.inuse"}, {"FRAG_inuse", "frag.inuse"},
		{"FRAG_memory", "frag.memory"}, {"TCP6_inuse", "tcp6.inuse"}, {"UDP6_inuse", "udp6.inuse"},
		{"UDPLITE6_inuse", "udplite6.inuse"}, {"RAW6_inuse", "raw6.inuse"}, {"FRAG6_inuse", "frag6.inuse"},
		{"FRAG6_memory", "frag6.memory"},
	} {
		add(nodeSimple("node_sockstat_"+s[0], Gauge, "network.sockstat."+s[1], "Number of "+strings.ReplaceAll(s[0], "_", " ")+"."))
	}
	for _, s := range [][2]string{{"TCP_mem_bytes", "tcp.mem"}, {"UDP_mem_bytes", "udp.mem"}} {
		add(nodeFamily{name: "node_sockstat_" + s[0], typ: Gauge, help: "Number of " + strings.ReplaceAll(s[0], "_", " ") + ".", parts: []nodePart{{pcp: "network.sockstat." + s[1], mulBy: "hinv.pagesize"}}})
	}

	// softnet: /proc/net/softnet_stat per CPU
	for _, s := range [][2]string{{"processed", "processed"}, {"dropped", "dropped"}, {"times_squeezed", "time_squeeze"}, {"received_rps", "received_rps"}, {"flow_limit_count", "flow_limit_count"}} {
		add(nodeFamily{name: "node_softnet_" + s[0] + "_total", typ: Counter, help: "Number of " + strings.ReplaceAll(s[0], "_", " ") + " packets", parts: []nodePart{{pcp: "network.softnet.percpu." + s[1], label: "cpu", trim: "cpu"}}})
	}

	// uname (no domainname: PCP does not read it), time, conntrack
	add(nodeFamily{name: "node_uname_info", typ: Gauge, help: "Labeled system information as provided by the uname system call.", parts: []nodePart{{one: true, joins: []nodeJoin{
		{"machine", "kernel.uname.machine"}, {"nodename", "kernel.uname.nodename"}, {"release", "kernel.uname.release"},
		{"sysname", "kernel.uname.sysname"}, {"version", "kernel.uname.version"},
	}}}})
	add(nodeFamily{name: "node_time_seconds", typ: Gauge, help: "System time in seconds since epoch (1970).", parts: []nodePart{{now: true}}})
	add(
		nodeSimple("node_nf_conntrack_entries", Gauge, "netfilter.ip_conntrack_count", "Number of currently allocated flow entries for connection tracking."),
		nodeSimple("node_nf_conntrack_entries_limit", Gauge, "netfilter.ip_conntrack_max", "Maximum size of connection tracking table."),
	)
	return fs
}()

// nodeProfile is the node naming's table.
var nodeProfile = newProfile(nodeFamilies, "node_exporter's family")

// NodeFamilyNames returns the names of the profile's families, in table
// order (for documentation and tests).
func NodeFamilyNames() []string { return nodeProfile.names() }

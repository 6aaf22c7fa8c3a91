package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/pcp-exporter/pcp-exporter/bridge"
	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
	"github.com/pcp-exporter/pcp-exporter/source/archive"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

// hostmetricsRecorded lists the PCP metrics the test records from the
// local pmcd: the linux agent's metrics of the receiver's formulas (whole
// subtrees took pmlogger a minute on the busy shared pmcd).
func hostmetricsRecorded() string {
	l := []string{"kernel.all.load", "kernel.all.running", "kernel.all.blocked", "kernel.all.sysfork", "kernel.all.uptime", "hinv.ncpu",
		"mem.physmem", "filesys.used", "filesys.avail", "filesys.free", "filesys.usedfiles", "filesys.freefiles", "filesys.mountdir",
		"swapdev.length", "swapdev.free"}
	for _, f := range []string{"user", "sys", "idle", "irq.hard", "nice", "irq.soft", "steal", "wait.total"} {
		l = append(l, "kernel.percpu.cpu."+f)
	}
	for _, f := range []string{"free", "bufmem", "cached", "slabReclaimable", "slabUnreclaimable", "available", "dirty"} {
		l = append(l, "mem.util."+f)
	}
	for _, f := range []string{"pswpin", "pswpout", "pgpgin", "pgpgout", "pgfault", "pgmajfault"} {
		l = append(l, "mem.vmstat."+f)
	}
	for _, tree := range []string{"disk.dev.", "disk.partitions.", "disk.md."} {
		for _, f := range []string{"blkread", "blkwrite", "read", "write", "read_merge", "write_merge", "read_rawactive", "write_rawactive", "avactive", "aveq", "inflight"} {
			l = append(l, tree+f)
		}
	}
	for _, d := range []string{"in.", "out."} {
		for _, f := range []string{"bytes", "packets", "errors", "drops"} {
			l = append(l, "network.interface."+d+f)
		}
	}
	for _, st := range []string{"close_wait", "close", "closing", "established", "fin_wait1", "fin_wait2", "last_ack", "listen", "syn_sent", "syn_recv", "time_wait"} {
		l = append(l, "network.tcpconn."+st, "network.tcpconn6."+st)
	}
	return strings.Join(l, "\n")
}

// TestHostmetricsOTLPToCollector records the local pmcd's host metrics
// with pmlogger, pushes one instant of the recording with --naming
// hostmetrics to a real OpenTelemetry Collector and backfills it by OTLP
// to another, and checks every host metric the collector received against
// the pinned receiver's metadata.yaml (name, description, unit, Sum or Gauge,
// monotonicity, temporality, int or double, attribute names and enum
// values), the resource (host.name, host.id from /etc/machine-id,
// os.type) and the scope (name, version); and every pushed value against
// the default naming's Prometheus series of the same instant of the same
// recording, by the receiver's formulas (docs/hostmetrics-profile.md).
func TestHostmetricsOTLPToCollector(t *testing.T) {
	t.Parallel() // it waits on pmlogger and two collectors; no t.Setenv
	bins := e2e.Require(t, "pmlogger")
	e2e.RequirePMCD(t) // pmlogger records the system pmcd
	pushAddr, _, pushOut := otelcol(t)
	backAddr, _, backOut := otelcol(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "pmlogger.config")
	if err := os.WriteFile(cfg, []byte("log mandatory on 1 sec {\n"+hostmetricsRecorded()+"\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	arch := filepath.Join(dir, "host")
	began := time.Now()
	rec := exec.Command(bins[0], "-s", "3", "-t", "1", "-c", cfg, "-l", filepath.Join(dir, "pmlogger.log"), arch)
	if out, err := rec.CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "pmlogger.log"))
		t.Fatalf("pmlogger: %v\n%s\n%s", err, out, log)
	}
	replay := func() *archive.Replay {
		a, err := pcplog.Open(arch)
		if err != nil {
			t.Fatal(err)
		}
		rp, err := archive.NewReplay([]*pcplog.Archive{a}, archive.ReplayOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rp.Close() })
		return rp
	}
	t.Logf("pmlogger recorded in %v", time.Since(began).Round(time.Millisecond))
	rpPush, rpScrape := replay(), replay()
	at := rpPush.Start().Add(1500 * time.Millisecond) // between the records
	when := func(time.Time) (time.Time, bool) { return at, true }

	// the push, with the hostmetrics naming
	hm, err := newMapper("", "hostmetrics", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &bridge.OTLPConfig{Endpoint: pushAddr, Protocol: "grpc", Interval: time.Hour, Timeout: 5 * time.Second, Insecure: true}
	stop, err := f.StartPush(context.Background(), slog.New(slog.DiscardHandler), nil, bridge.NewOTelProducer(hm, nil, bridge.Source{Name: "host", Src: rpPush, When: when}))
	if err != nil {
		t.Fatal(err)
	}
	stop()
	// the backfill, with the hostmetrics naming
	bf := &backfillFlags{archives: []string{arch}, output: "otlp-grpc:" + backAddr, otlpInsecure: true, naming: "hostmetrics", step: time.Second, stepSet: true, quiet: true}
	var stderr bytes.Buffer
	if err := runBackfill(bf, &stderr); err != nil {
		t.Fatalf("backfill: %v\n%s", err, stderr.String())
	}
	// the scrape of the same instant, with the default naming
	def, err := newMapper("", "default", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := bridge.New(def, nil, bridge.Source{Name: "host", Src: rpScrape, When: when}).WriteText(&text); err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(text.Bytes()))
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	prom := func(name, inst string) (float64, bool) {
		mf := fams[name]
		if mf == nil {
			return 0, false
		}
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if l.GetName() == "instname" && l.GetValue() == inst || inst == "" {
					switch {
					case m.Counter != nil:
						return m.Counter.GetValue(), true
					case m.Gauge != nil:
						return m.Gauge.GetValue(), true
					case m.Untyped != nil:
						return m.Untyped.GetValue(), true
					}
				}
			}
			if inst == "" && len(m.Label) == 0 {
				if m.Counter != nil {
					return m.Counter.GetValue(), true
				}
				if m.Gauge != nil {
					return m.Gauge.GetValue(), true
				}
			}
		}
		return 0, false
	}

	wait := func(out string) []otlpPoint {
		deadline := time.Now().Add(20 * time.Second)
		for {
			var pts []otlpPoint
			for _, p := range readOTLPFile(t, out) {
				if strings.HasPrefix(p.metric, "system.") {
					pts = append(pts, p)
				}
			}
			if n := len(pts); n > 0 && time.Now().After(deadline.Add(-18*time.Second)) || time.Now().After(deadline) {
				return pts
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	t.Logf("pushed, backfilled and scraped after %v", time.Since(began).Round(time.Millisecond))
	pushed, backfilled := wait(pushOut), wait(backOut)
	if len(pushed) == 0 {
		t.Fatalf("no system.* metric pushed:\n%s", text.String()[:min(2000, text.Len())])
	}

	spec := e2e.HostMetrics(t, "../../testdata/otel-hostmetrics")
	leftOut := map[string][]string{ // attributes PCP has no source for (docs/hostmetrics-profile.md)
		"system.filesystem.usage": {"mode", "type"}, "system.filesystem.inodes.usage": {"mode", "type"},
	}
	host, _ := os.Hostname()
	machineID, err := os.ReadFile("/etc/machine-id")
	if err != nil {
		t.Fatal(err)
	}
	checkShape := func(what string, pts []otlpPoint) map[string]bool {
		names := map[string]bool{}
		for _, p := range pts {
			names[p.metric] = true
			s, ok := spec[p.metric]
			if !ok {
				t.Errorf("%s %s: not a metric of the receiver", what, p.metric)
				continue
			}
			vt := "double"
			if p.isInt {
				vt = "int"
			}
			if p.unit != s.Unit || p.kind != s.Kind || p.monotonic != s.Monotonic || vt != s.ValueType {
				t.Errorf("%s %s: unit %q %s monotonic %v %s, metadata.yaml %q %s monotonic %v %s", what, p.metric, p.unit, p.kind, p.monotonic, vt, s.Unit, s.Kind, s.Monotonic, s.ValueType)
			}
			if p.desc != s.Description {
				t.Errorf("%s %s: description %q, metadata.yaml %q", what, p.metric, p.desc, s.Description)
			}
			if p.kind == "sum" && (p.temporal != 2 || s.Temporality != "cumulative") {
				t.Errorf("%s %s: temporality %d, metadata.yaml %s", what, p.metric, p.temporal, s.Temporality)
			}
			var keys []string
			for k, v := range p.attrs {
				keys = append(keys, k)
				if enum, ok := s.Attributes[k]; ok && enum != nil && !slices.Contains(enum, v) {
					t.Errorf("%s %s: %s=%q not in the enum %v", what, p.metric, k, v, enum)
				}
			}
			sort.Strings(keys)
			var want []string
			for _, k := range s.Keys() {
				if !slices.Contains(leftOut[p.metric], k) {
					want = append(want, k)
				}
			}
			if !slices.Equal(keys, want) {
				t.Errorf("%s %s: attributes %v, metadata.yaml %v (less %v)", what, p.metric, keys, s.Keys(), leftOut[p.metric])
			}
			if p.resource["host.name"] != host || p.resource["host.id"] != strings.TrimSpace(string(machineID)) || p.resource["os.type"] != "linux" {
				t.Errorf("%s %s: resource %v, want host.name %q, host.id %q (/etc/machine-id), os.type linux", what, p.metric, p.resource, host, strings.TrimSpace(string(machineID)))
			}
			if p.scope != "github.com/pcp-exporter/pcp-exporter/bridge" || p.scopeVer == "" {
				t.Errorf("%s %s: scope %q version %q", what, p.metric, p.scope, p.scopeVer)
			}
		}
		return names
	}
	pushedNames := checkShape("pushed", pushed)
	backNames := checkShape("backfilled", backfilled)
	// every metric the receiver enables by default, unless this host has no
	// instance of its source (no swap device)
	for name, s := range spec {
		if !s.Enabled || pushedNames[name] {
			continue
		}
		if name == "system.paging.usage" && fams["swapdev_free_bytes"] == nil {
			continue
		}
		t.Errorf("%s: enabled by default in the receiver, not pushed", name)
	}
	for name := range pushedNames {
		if !backNames[name] {
			t.Errorf("%s: pushed, not backfilled", name)
		}
	}

	// the values, from the default naming's series by the receiver's formulas
	disk := func(field, dev string) (float64, bool) {
		for _, tree := range []string{"disk_dev_", "disk_partitions_", "disk_md_"} {
			if v, ok := prom(tree+field, dev); ok {
				return v, true
			}
		}
		return 0, false
	}
	sum := func(terms ...any) (float64, bool) { // name, inst, coefficient, ...
		x := 0.0
		for i := 0; i < len(terms); i += 3 {
			v, ok := prom(terms[i].(string), terms[i+1].(string))
			if !ok {
				return 0, false
			}
			x += v * terms[i+2].(float64)
		}
		return x, true
	}
	cpuField := map[string]string{"user": "user", "system": "sys", "idle": "idle", "interrupt": "irq_hard", "nice": "nice", "softirq": "irq_soft", "steal": "steal", "wait": "wait"}
	memField := map[string]string{"free": "mem_util_free_bytes", "buffered": "mem_util_bufmem_bytes", "slab_reclaimable": "mem_util_slab_reclaimable_bytes", "slab_unreclaimable": "mem_util_slab_unreclaimable_bytes"}
	dir2 := func(a map[string]string, read, write string) string {
		if a["direction"] == "read" {
			return read
		}
		return write
	}
	checked := map[string]int{}
	for _, p := range pushed {
		a := p.attrs
		var want float64
		var ok bool
		switch p.metric {
		case "system.cpu.time":
			want, ok = prom("kernel_percpu_cpu_"+cpuField[a["state"]]+"_seconds_total", a["cpu"])
		case "system.cpu.logical.count":
			want, ok = prom("hinv_ncpu", "")
		case "system.cpu.load_average.1m", "system.cpu.load_average.5m", "system.cpu.load_average.15m":
			m := strings.TrimSuffix(strings.TrimPrefix(p.metric, "system.cpu.load_average."), "m")
			want, ok = prom("kernel_all_load", m+" minute")
			// the decimal /proc/loadavg printed, which the receiver parses
			// and PCP keeps as a FLOAT
			want, _ = strconv.ParseFloat(strconv.FormatFloat(float64(float32(want)), 'g', -1, 32), 64)
		case "system.memory.usage":
			switch a["state"] {
			case "used":
				want, ok = sum("mem_physmem_bytes", "", 1.0, "mem_util_free_bytes", "", -1.0, "mem_util_bufmem_bytes", "", -1.0,
					"mem_util_cached_bytes", "", -1.0, "mem_util_slab_reclaimable_bytes", "", -1.0)
			case "cached":
				want, ok = sum("mem_util_cached_bytes", "", 1.0, "mem_util_slab_reclaimable_bytes", "", 1.0)
			default:
				want, ok = prom(memField[a["state"]], "")
			}
		case "system.memory.limit":
			want, ok = prom("mem_physmem_bytes", "")
		case "system.linux.memory.available":
			want, ok = prom("mem_util_available_bytes", "")
		case "system.linux.memory.dirty":
			want, ok = prom("mem_util_dirty_bytes", "")
		case "system.disk.io":
			want, ok = disk(dir2(a, "blkread_total", "blkwrite_total"), a["device"])
			want *= 512
		case "system.disk.operations":
			want, ok = disk(dir2(a, "read_total", "write_total"), a["device"])
		case "system.disk.merged":
			want, ok = disk(dir2(a, "read_merge_total", "write_merge_total"), a["device"])
		case "system.disk.operation_time":
			want, ok = disk(dir2(a, "read_rawactive_seconds_total", "write_rawactive_seconds_total"), a["device"])
		case "system.disk.io_time":
			want, ok = disk("avactive_seconds_total", a["device"])
		case "system.disk.weighted_io_time":
			want, ok = disk("aveq_seconds_total", a["device"])
		case "system.disk.pending_operations":
			want, ok = disk("inflight", a["device"])
		case "system.filesystem.usage", "system.filesystem.inodes.usage":
			if _, mounted := fams["filesys_mountdir_info"]; !mounted || !hasSeries(fams["filesys_mountdir_info"], a["device"], a["mountpoint"]) {
				t.Errorf("%s %v: no filesys_mountdir_info{instname=%q,value=%q}", p.metric, a, a["device"], a["mountpoint"])
			}
			field := map[string]string{"used": "filesys_used_bytes", "free": "filesys_avail_bytes"}[a["state"]]
			if p.metric == "system.filesystem.inodes.usage" {
				field = map[string]string{"used": "filesys_usedfiles", "free": "filesys_freefiles"}[a["state"]]
			}
			if a["state"] == "reserved" {
				want, ok = sum("filesys_free_bytes", a["device"], 1.0, "filesys_avail_bytes", a["device"], -1.0)
			} else {
				want, ok = prom(field, a["device"])
			}
		case "system.network.io", "system.network.packets", "system.network.errors", "system.network.dropped":
			field := map[string]string{"system.network.io": "bytes", "system.network.packets": "packets", "system.network.errors": "errors", "system.network.dropped": "drops"}[p.metric]
			dirn := map[string]string{"receive": "in", "transmit": "out"}[a["direction"]]
			want, ok = prom("network_interface_"+dirn+"_"+field+"_total", a["device"])
		case "system.network.connections":
			st := strings.ToLower(a["state"])
			st = strings.Replace(strings.Replace(st, "wait_1", "wait1", 1), "wait_2", "wait2", 1)
			want, ok = sum("network_tcpconn_"+st, "", 1.0, "network_tcpconn6_"+st, "", 1.0)
		case "system.paging.usage":
			if a["state"] == "used" {
				want, ok = sum("swapdev_length_bytes", a["device"], 1.0, "swapdev_free_bytes", a["device"], -1.0)
			} else {
				want, ok = prom("swapdev_free_bytes", a["device"])
			}
		case "system.paging.operations":
			field := map[string]string{"page_in major": "pswpin", "page_out major": "pswpout", "page_in minor": "pgpgin", "page_out minor": "pgpgout"}[a["direction"]+" "+a["type"]]
			want, ok = prom("mem_vmstat_"+field+"_total", "")
			want *= 4096 // gopsutil's count x 4 KiB, as the receiver reports it
		case "system.paging.faults":
			if a["type"] == "major" {
				want, ok = sum("mem_vmstat_pgmajfault_total", "", 4096.0)
			} else {
				want, ok = sum("mem_vmstat_pgfault_total", "", 4096.0, "mem_vmstat_pgmajfault_total", "", -4096.0)
			}
		case "system.processes.count":
			want, ok = prom("kernel_all_"+a["status"], "")
		case "system.processes.created":
			want, ok = prom("kernel_all_sysfork_total", "")
		case "system.uptime":
			want, ok = prom("kernel_all_uptime_seconds", "")
		default:
			t.Errorf("%s: no expected value in this test", p.metric)
			continue
		}
		if !ok {
			t.Errorf("%s %v: no Prometheus series to compare with", p.metric, a)
			continue
		}
		if p.isInt {
			want = math.Round(want)
		}
		if p.value != want && math.Abs(p.value-want) > 1e-9*math.Abs(want) {
			t.Errorf("%s %v: pushed %v, the scrape says %v", p.metric, a, p.value, want)
		}
		if p.time != at.UnixNano() {
			t.Errorf("%s: time %d, want the replayed instant %d", p.metric, p.time, at.UnixNano())
		}
		checked[p.metric]++
	}
	var summary []string
	for m, n := range checked {
		summary = append(summary, fmt.Sprintf("%s:%d", m, n))
	}
	sort.Strings(summary)
	t.Logf("values checked: %d metrics (%s); backfilled %d points", len(checked), strings.Join(summary, " "), len(backfilled))
}

// hasSeries reports whether mf has a series with instname inst and value
// label v (an info family).
func hasSeries(mf *dto.MetricFamily, inst, v string) bool {
	for _, m := range mf.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if got["instname"] == inst && got["value"] == v {
			return true
		}
	}
	return false
}

// Package mmvcorpus holds the definitions of the corpus MMV files as
// mmvwrite configurations, for the tests of the reader (package mmv) and of
// the writer (package mmvwrite): the scenarios of
// testdata/pcp-corpus/tools/mmvwriter.c, the program that wrote the files
// with libpcp_mmv.
package mmvcorpus

import (
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source/mmv/mmvwrite"
)

func units(ds, dt, dc int8, ss, st uint8, sc int8) semantics.Units {
	return semantics.Units{DimSpace: ds, DimTime: dt, DimCount: dc, ScaleSpace: ss, ScaleTime: st, ScaleCount: sc}
}

func metric(name string, item uint32, t mmvwrite.MetricType, sem semantics.Sem, u semantics.Units, indom uint32, oneLine, help string) mmvwrite.MetricDef {
	return mmvwrite.MetricDef{Name: name, Item: item, Type: t, Sem: sem, Units: u, InDom: indom, OneLine: oneLine, Help: help}
}

func inst(id int32, name string) mmvwrite.InstanceDef {
	return mmvwrite.InstanceDef{ID: id, Name: name}
}

const (
	semCounter  = semantics.SemCounter
	semInstant  = semantics.SemInstant
	semDiscrete = semantics.SemDiscrete
)

// Configs are the scenarios of testdata/pcp-corpus/tools/mmvwriter.c
// (word "stats", "corpus" for v2), the program that wrote the corpus files with libpcp_mmv.
var Configs = map[string]mmvwrite.Config{
	"corpusv1": {
		Cluster: 11,
		InDoms: []mmvwrite.InDomDef{
			{Serial: 1, Instances: []mmvwrite.InstanceDef{inst(0, "GET"), inst(3, "POST"), inst(10, "DELETE with space"), inst(1000, "max id")},
				OneLine: "request methods", Help: "Long help for the request methods indom.\nSecond line."},
			{Serial: 2, Instances: []mmvwrite.InstanceDef{inst(1, "one"), inst(2, "two")}},
		},
		Metrics: []mmvwrite.MetricDef{
			metric("stats.i32", 1, mmvwrite.TypeI32, semCounter, units(0, 0, 1, 0, 0, 0), 0, "32-bit signed counter", "Long help: 32-bit signed counter."),
			metric("stats.u32", 2, mmvwrite.TypeU32, semInstant, units(1, 0, 0, semantics.SpaceKByte, 0, 0), 0, "32-bit unsigned instant Kbyte", "Long help: u32."),
			metric("stats.i64", 3, mmvwrite.TypeI64, semDiscrete, units(0, 0, 0, 0, 0, 0), 0, "64-bit signed discrete", "Long help: i64 discrete, no units."),
			metric("stats.u64", 4, mmvwrite.TypeU64, semCounter, units(1, 0, 0, semantics.SpaceByte, 0, 0), 0, "64-bit unsigned counter bytes", "Long help: u64."),
			metric("stats.float", 5, mmvwrite.TypeFloat, semInstant, units(0, 1, 0, 0, semantics.TimeMSec, 0), 0, "float millisec", "Long help: float."),
			metric("stats.double", 6, mmvwrite.TypeDouble, semInstant, units(0, -1, 1, 0, semantics.TimeSec, 0), 0, "double count/sec", "Long help: double."),
			metric("stats.string", 7, mmvwrite.TypeString, semDiscrete, units(0, 0, 0, 0, 0, 0), 0, "a string value", "Long help: string."),
			metric("stats.elapsed.done", 8, mmvwrite.TypeElapsed, semCounter, units(0, 1, 0, 0, semantics.TimeUSec, 0), 0, "elapsed time, interval closed", "Closed timed interval: value is static."),
			metric("stats.elapsed.running", 9, mmvwrite.TypeElapsed, semCounter, units(0, 1, 0, 0, semantics.TimeUSec, 0), 0, "elapsed time, interval still open", "Open timed interval: pmdammv adds (now - start), so the value grows with time."),
			metric("stats.requests", 10, mmvwrite.TypeU64, semCounter, units(0, 0, 1, 0, 0, 0), 1, "requests by method", "Long help: per-method request counter."),
			metric("stats.latency", 11, mmvwrite.TypeDouble, semInstant, units(0, 1, 0, 0, semantics.TimeMSec, 0), 1, "latency by method", ""),
			metric("stats.pairs", 12, mmvwrite.TypeI32, semInstant, units(0, 0, 0, 0, 0, 0), 2, "", "Only long help text for pairs."),
			metric("stats.names", 13, mmvwrite.TypeString, semInstant, units(0, 0, 0, 0, 0, 0), 2, "per-instance strings", ""),
			metric("stats.nohelp", 14, mmvwrite.TypeU32, semInstant, units(0, 0, 0, 0, 0, 0), 0, "", ""),
		},
	},
	"corpusv2": {
		Cluster: 12, Flags: mmvwrite.FlagNoPrefix,
		InDoms: []mmvwrite.InDomDef{{Serial: 5, Instances: []mmvwrite.InstanceDef{
			inst(7, "instance-name-that-is-longer-than-the-sixty-four-byte-limit-of-mmv-version-one-corpus"),
			inst(8, "second long instance name with spaces, commas and more than sixty-four bytes corpus"),
			inst(99999, "short"),
		}, OneLine: "long-named instances", Help: "Instances with names > 64 bytes."}},
		Metrics: []mmvwrite.MetricDef{
			metric("corpus_noprefix.a_metric_name_component_that_is_definitely_longer_than_sixty_four_bytes_in_total.counter", 1, mmvwrite.TypeU64, semCounter, units(0, 0, 1, 0, 0, 0), 5, "long-named counter", "Counter with a metric name longer than 64 bytes."),
			metric("corpus_noprefix.short_double", 2, mmvwrite.TypeDouble, semInstant, units(1, -1, 0, semantics.SpaceMByte, semantics.TimeSec, 0), 5, "Mbyte/sec per instance", ""),
			metric("corpus_noprefix.string_with_a_long_name_that_needs_the_version_two_string_section", 3, mmvwrite.TypeString, semDiscrete, units(0, 0, 0, 0, 0, 0), 0xffffffff, "", ""),
			metric("corpus_noprefix.int32", 4, mmvwrite.TypeI32, semInstant, units(0, 1, 0, 0, semantics.TimeNSec, 0), 0, "nanoseconds", "Signed 32-bit, nanoseconds."),
		},
	},
	"corpusv3": {
		Cluster: 13, Flags: mmvwrite.FlagProcess,
		InDoms: []mmvwrite.InDomDef{{Serial: 3, Instances: []mmvwrite.InstanceDef{inst(1, "red"), inst(20, "green light"), inst(300, "blue")},
			OneLine: "labelled indom", Help: "Instance domain carrying indom and instance labels."}},
		Metrics: []mmvwrite.MetricDef{
			metric("stats.labelled.counter", 1, mmvwrite.TypeU32, semCounter, units(0, 0, 1, 0, 0, 0), 3, "labelled counter", "U32 counter with item labels."),
			metric("stats.labelled.gauge", 2, mmvwrite.TypeFloat, semInstant, units(1, 0, 0, semantics.SpaceGByte, 0, 0), 3, "labelled gauge", ""),
			metric("stats.labelled.text", 3, mmvwrite.TypeString, semDiscrete, units(0, 0, 0, 0, 0, 0), 0xffffffff, "", ""),
			metric("stats.labelled.elapsed", 4, mmvwrite.TypeElapsed, semCounter, units(0, 1, 0, 0, semantics.TimeUSec, 0), 0xffffffff, "elapsed", "Closed interval, static value."),
		},
		Labels: []mmvwrite.LabelDef{
			{Type: semantics.LabelCluster, Name: "app", Value: `"corpus"`},
			{Type: semantics.LabelCluster, Name: "build", Value: `42`},
			{Type: semantics.LabelCluster, Name: "debug", Value: `false`},
			{Type: semantics.LabelCluster, Name: "nothing", Value: `null`, Optional: true},
			{Type: semantics.LabelInDom, Identity: 3, Name: "palette", Value: `"rgb"`},
			{Type: semantics.LabelItem, Identity: 1, Name: "tags", Value: `["a","b",3]`},
			{Type: semantics.LabelItem, Identity: 2, Name: "limits", Value: `{"lo":0,"hi":1.5}`},
			{Type: semantics.LabelItem, Identity: 2, Name: "optional_note", Value: `"gauge"`, Optional: true},
			{Type: semantics.LabelInstances, Identity: 3, Inst: 1, Name: "wavelength_nm", Value: `700`},
			{Type: semantics.LabelInstances, Identity: 3, Inst: 20, Name: "wavelength_nm", Value: `530`},
			{Type: semantics.LabelInstances, Identity: 3, Inst: 300, Name: "primary", Value: `true`},
		},
	},
	"corpussentinel": {
		Cluster: 14, Flags: mmvwrite.FlagSentinel,
		InDoms:  []mmvwrite.InDomDef{{Serial: 4, Instances: []mmvwrite.InstanceDef{inst(1, "set"), inst(2, "sentinel")}, OneLine: "set/unset"}},
		Metrics: sentinelMetrics(),
	},
}

// sentinelMetrics are the metrics of corpussentinel: one of each type.
func sentinelMetrics() []mmvwrite.MetricDef {
	var ms []mmvwrite.MetricDef
	for i, leaf := range []string{"i32", "u32", "i64", "u64", "float", "double", "string", "elapsed"} {
		typ := []mmvwrite.MetricType{mmvwrite.TypeI32, mmvwrite.TypeU32, mmvwrite.TypeI64, mmvwrite.TypeU64, mmvwrite.TypeFloat, mmvwrite.TypeDouble, mmvwrite.TypeString, mmvwrite.TypeElapsed}[i]
		m := mmvwrite.MetricDef{Name: "stats." + leaf, Item: uint32(i + 1), Type: typ, Sem: semInstant, InDom: 4, OneLine: "sentinel test"}
		if typ == mmvwrite.TypeElapsed {
			m.Sem, m.Units = semCounter, units(0, 1, 0, 0, semantics.TimeUSec, 0)
		}
		ms = append(ms, m)
	}
	return ms
}

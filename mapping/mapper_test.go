package mapping

import (
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

type metricBuilder struct{ m source.Metric }

func sourceMetric(name string, d semantics.Desc) *metricBuilder {
	return &metricBuilder{source.Metric{Name: name, Desc: d}}
}

var (
	kbyte    = semantics.Units{DimSpace: 1, ScaleSpace: semantics.SpaceKByte}
	msec     = semantics.Units{DimTime: 1, ScaleTime: semantics.TimeMSec}
	usec     = semantics.Units{DimTime: 1, ScaleTime: semantics.TimeUSec}
	count    = semantics.Units{DimCount: 1}
	kbPerSec = semantics.Units{DimSpace: 1, DimTime: -1, ScaleSpace: semantics.SpaceKByte, ScaleTime: semantics.TimeSec}
)

func desc(t semantics.Type, s semantics.Sem, u semantics.Units) semantics.Desc {
	return semantics.Desc{Type: t, Sem: s, Units: u, InDom: semantics.InDomNull}
}

func TestFamilyNames(t *testing.T) {
	cases := []struct {
		pcp        string
		d          semantics.Desc
		naming     Naming
		name, om   string
		typ        Type
		unit       string
		skip       SkipReason
		scale      float64
		help       string
		oneline    string
		helpSource string
	}{
		{pcp: "disk.dev.read_bytes", d: desc(semantics.TypeU64, semantics.SemCounter, kbyte), name: "disk_dev_read_bytes_total", om: "disk_dev_read_bytes", typ: Counter, unit: "bytes", scale: 1024},
		{pcp: "kernel.all.cpu.user", d: desc(semantics.TypeU64, semantics.SemCounter, msec), name: "kernel_all_cpu_user_seconds_total", om: "kernel_all_cpu_user_seconds", typ: Counter, unit: "seconds", scale: 1e-3},
		{pcp: "kernel.all.load", d: desc(semantics.TypeFloat, semantics.SemInstant, semantics.Units{}), name: "kernel_all_load", om: "kernel_all_load", typ: Gauge, scale: 1},
		{pcp: "hinv.ncpu", d: desc(semantics.Type32, semantics.SemDiscrete, count), name: "hinv_ncpu", om: "hinv_ncpu", typ: Gauge, scale: 1},
		{pcp: "network.interface.in.bytes", d: desc(semantics.TypeU64, semantics.SemCounter, semantics.Units{DimSpace: 1}), name: "network_interface_in_bytes_total", om: "network_interface_in_bytes", typ: Counter, unit: "bytes", scale: 1},
		{pcp: "disk.dev.read_bytes_rate", d: desc(semantics.TypeDouble, semantics.SemInstant, kbPerSec), name: "disk_dev_read_bytes_rate_bytes_per_second", om: "disk_dev_read_bytes_rate_bytes_per_second", typ: Gauge, unit: "bytes_per_second", scale: 1024},
		{pcp: "disk.read_bytes", d: desc(semantics.TypeDouble, semantics.SemInstant, kbPerSec), name: "disk_read_bytes_per_second", om: "disk_read_bytes_per_second", typ: Gauge, unit: "bytes_per_second", scale: 1024},
		{pcp: "app.requests_total", d: desc(semantics.TypeU64, semantics.SemCounter, count), name: "app_requests_total", om: "app_requests", typ: Counter, scale: 1},
		{pcp: "i64.x10", d: desc(semantics.Type64, semantics.SemCounter, semantics.Units{DimCount: 1, ScaleCount: 3}), name: "i64_x10_total", om: "i64_x10", typ: Counter, scale: 1000},
		{pcp: "kernel.uname.release", d: desc(semantics.TypeString, semantics.SemDiscrete, semantics.Units{}), name: "kernel_uname_release_info", om: "kernel_uname_release", typ: Info, scale: 1},
		{pcp: "app.build_info", d: desc(semantics.TypeString, semantics.SemDiscrete, semantics.Units{}), name: "app_build_info", om: "app_build", typ: Info, scale: 1},
		// promtool lint: PCP's trailing _s of a string ("as a string":
		// proc.psinfo.blocked_s, pminfo -d: string, no units) is not seconds
		{pcp: "proc.psinfo.blocked_s", d: desc(semantics.TypeString, semantics.SemInstant, semantics.Units{}), name: "proc_psinfo_blocked_string_info", om: "proc_psinfo_blocked_string", typ: Info, scale: 1},
		{pcp: "mmv.app.elapsed", d: desc(semantics.Type64, semantics.SemCounter, usec), name: "mmv_app_elapsed_seconds_total", om: "mmv_app_elapsed_seconds", typ: Counter, unit: "seconds", scale: 1e-6},
		// promtool lint: no type word in the name.
		{pcp: "mmv.corpusv3.stats.labelled.counter", d: desc(semantics.TypeU32, semantics.SemCounter, count), name: "mmv_corpusv3_stats_labelled_total", om: "mmv_corpusv3_stats_labelled", typ: Counter, scale: 1},
		{pcp: "mmv.corpusv3.stats.labelled.gauge", d: desc(semantics.TypeFloat, semantics.SemInstant, semantics.Units{DimSpace: 1, ScaleSpace: semantics.SpaceGByte}), name: "mmv_corpusv3_stats_labelled_bytes", om: "mmv_corpusv3_stats_labelled_bytes", typ: Gauge, unit: "bytes", scale: 1 << 30},
		// promtool lint: unit words other than the base unit's are dropped
		// (the value is converted and the suffix names the unit), gauges do
		// not end in _total, _count, _sum or _bucket.
		{pcp: "types.hours", d: desc(semantics.TypeU32, semantics.SemInstant, semantics.Units{DimTime: 1, ScaleTime: semantics.TimeHour}), name: "types_seconds", om: "types_seconds", typ: Gauge, unit: "seconds", scale: 3600},
		{pcp: "types.sec_squared", d: desc(semantics.TypeDouble, semantics.SemInstant, semantics.Units{DimTime: 2, ScaleTime: semantics.TimeSec}), name: "types_seconds_squared", om: "types_seconds_squared", typ: Gauge, unit: "seconds_squared", scale: 1},
		{pcp: "types.mbyte_per_hour", d: desc(semantics.TypeDouble, semantics.SemInstant, semantics.Units{DimSpace: 1, DimTime: -1, ScaleSpace: semantics.SpaceMByte, ScaleTime: semantics.TimeHour}), name: "types_bytes_per_second", om: "types_bytes_per_second", typ: Gauge, unit: "bytes_per_second", scale: 1048576.0 / 3600},
		{pcp: "types.kbyte_per_count", d: desc(semantics.TypeDouble, semantics.SemInstant, semantics.Units{DimSpace: 1, DimCount: -1, ScaleSpace: semantics.SpaceKByte}), name: "types_bytes", om: "types_bytes", typ: Gauge, unit: "bytes", scale: 1024},
		{pcp: "types.kbyte_rate", d: desc(semantics.TypeDouble, semantics.SemInstant, kbPerSec), name: "types_rate_bytes_per_second", om: "types_rate_bytes_per_second", typ: Gauge, unit: "bytes_per_second", scale: 1024},
		{pcp: "net.rtt.min", d: desc(semantics.TypeU32, semantics.SemInstant, msec), name: "net_rtt_min_seconds", om: "net_rtt_min_seconds", typ: Gauge, unit: "seconds", scale: 1e-3},
		{pcp: "app.hours", d: desc(semantics.TypeU32, semantics.SemInstant, count), name: "app_hours", om: "app_hours", typ: Gauge, scale: 1},
		// promtool lint: no abbreviated units; PCP's d_ (discard) spelt out
		// where it begins a word (pminfo -d on this host: millisec / count,
		// Kbyte / count), a trailing d left to the unit words.
		{pcp: "disk.dev.d_await", d: desc(semantics.TypeDouble, semantics.SemInstant, semantics.Units{DimTime: 1, DimCount: -1, ScaleTime: semantics.TimeMSec}), name: "disk_dev_discard_await_seconds", om: "disk_dev_discard_await_seconds", typ: Gauge, unit: "seconds", scale: 1e-3},
		{pcp: "disk.dm.d_avg_rqsz", d: desc(semantics.TypeDouble, semantics.SemInstant, semantics.Units{DimSpace: 1, DimCount: -1, ScaleSpace: semantics.SpaceKByte}), name: "disk_dm_discard_avg_rqsz_bytes", om: "disk_dm_discard_avg_rqsz_bytes", typ: Gauge, unit: "bytes", scale: 1024},
		{pcp: "app.uptime_d", d: desc(semantics.TypeU32, semantics.SemInstant, semantics.Units{DimTime: 1, ScaleTime: semantics.TimeHour}), name: "app_uptime_seconds", om: "app_uptime_seconds", typ: Gauge, unit: "seconds", scale: 3600},
		{pcp: "vfs.inodes.count", d: desc(semantics.TypeU32, semantics.SemInstant, semantics.Units{}), name: "vfs_inodescount", om: "vfs_inodescount", typ: Gauge, scale: 1},
		{pcp: "mem.util.hugepagesTotal", d: desc(semantics.TypeU64, semantics.SemInstant, semantics.Units{}), name: "mem_util_hugepagestotal", om: "mem_util_hugepagestotal", typ: Gauge, scale: 1},
		{pcp: "app.latency_sum", d: desc(semantics.TypeU64, semantics.SemCounter, msec), name: "app_latency_sum_seconds_total", om: "app_latency_sum_seconds", typ: Counter, unit: "seconds", scale: 1e-3},
		// Characters outside [a-zA-Z0-9_:].
		{pcp: "a-b.c d.é", d: desc(semantics.Type32, semantics.SemInstant, semantics.Units{}), name: "a_b_c_d__", om: "a_b_c_d__", typ: Gauge, scale: 1},
		{pcp: "9lives", d: desc(semantics.Type32, semantics.SemInstant, semantics.Units{}), name: "_9lives", om: "_9lives", typ: Gauge, scale: 1},
		// Skipped types.
		{pcp: "x.agg", d: desc(semantics.TypeAggregate, semantics.SemInstant, semantics.Units{}), skip: SkipAggregate},
		{pcp: "x.aggs", d: desc(semantics.TypeAggregateStatic, semantics.SemInstant, semantics.Units{}), skip: SkipAggregate},
		{pcp: "x.event", d: desc(semantics.TypeEvent, semantics.SemInstant, semantics.Units{}), skip: SkipEvent},
		{pcp: "x.hrevent", d: desc(semantics.TypeHighresEvent, semantics.SemInstant, semantics.Units{}), skip: SkipEvent},
		{pcp: "x.nosup", d: desc(semantics.TypeNoSupport, semantics.SemInstant, semantics.Units{}), skip: SkipUnsupported},
		// pmproxy naming: no conversion, no suffix, no _total, strings omitted.
		{pcp: "disk.dev.read_bytes", naming: NamingPmproxy, d: desc(semantics.TypeU64, semantics.SemCounter, kbyte), name: "disk_dev_read_bytes", om: "disk_dev_read_bytes", typ: Counter, scale: 1},
		{pcp: "kernel.all.cpu.user", naming: NamingPmproxy, d: desc(semantics.TypeU64, semantics.SemCounter, msec), name: "kernel_all_cpu_user", om: "kernel_all_cpu_user", typ: Counter, scale: 1},
		{pcp: "mmv.x.counter", naming: NamingPmproxy, d: desc(semantics.TypeU64, semantics.SemCounter, count), name: "mmv_x_counter", om: "mmv_x_counter", typ: Counter, scale: 1},
		{pcp: "hinv.ncpu", naming: NamingPmproxy, d: desc(semantics.Type32, semantics.SemDiscrete, count), name: "hinv_ncpu", om: "hinv_ncpu", typ: Gauge, scale: 1},
		{pcp: "kernel.uname.release", naming: NamingPmproxy, d: desc(semantics.TypeString, semantics.SemDiscrete, semantics.Units{}), skip: SkipString},
		{pcp: "x.event", naming: NamingPmproxy, d: desc(semantics.TypeEvent, semantics.SemInstant, semantics.Units{}), skip: SkipEvent},
		// HELP: one-line help, else the first line of the long help, else generated.
		{pcp: "h.one", d: desc(semantics.Type32, semantics.SemInstant, semantics.Units{}), oneline: "one line", helpSource: "long\nhelp", name: "h_one", om: "h_one", typ: Gauge, scale: 1, help: "one line"},
		{pcp: "h.long", d: desc(semantics.Type32, semantics.SemInstant, semantics.Units{}), helpSource: "long\nhelp", name: "h_long", om: "h_long", typ: Gauge, scale: 1, help: "long"},
		{pcp: "h.none", d: desc(semantics.Type32, semantics.SemInstant, semantics.Units{}), name: "h_none", om: "h_none", typ: Gauge, scale: 1, help: "PCP metric h.none"},
		{pcp: "h.none", naming: NamingPmproxy, d: desc(semantics.Type32, semantics.SemInstant, semantics.Units{}), name: "h_none", om: "h_none", typ: Gauge, scale: 1, help: ""},
	}
	for _, c := range cases {
		n := c.naming
		m, err := New(nil, Options{Naming: &n, With: LeanNames()})
		if err != nil {
			t.Fatal(err)
		}
		md := source.Metric{Name: c.pcp, Desc: c.d, OneLine: c.oneline, Help: c.helpSource}
		f, why := m.Map(&md)
		if why != c.skip {
			t.Errorf("%s (%s): skip %q, want %q", c.pcp, n, why, c.skip)
			continue
		}
		if why != "" {
			continue
		}
		if f.Name != c.name || f.OMName != c.om || f.Type != c.typ || f.Unit != c.unit || f.Scale != c.scale {
			t.Errorf("%s (%s): got name %q om %q type %s unit %q scale %v, want %q %q %s %q %v",
				c.pcp, n, f.Name, f.OMName, f.Type, f.Unit, f.Scale, c.name, c.om, c.typ, c.unit, c.scale)
		}
		if c.help != "" || c.naming == NamingPmproxy {
			if f.Help != c.help {
				t.Errorf("%s (%s): help %q, want %q", c.pcp, n, f.Help, c.help)
			}
		}
		// what promtool says of these stays: app.hours counts (no time
		// unit to convert), "a-b.c d.é" is made of sanitized characters
		if c.naming == NamingDefault && c.pcp != "app.hours" && c.pcp != "a-b.c d.é" {
			if problems := lint(t, &f); len(problems) > 0 {
				t.Errorf("%s: promtool's lint on %s: %v", c.pcp, f.Name, problems)
			}
		}
	}
}

// lint runs promtool's lint (client_golang's promlint, which promtool
// check metrics runs) over one sample of f.
func lint(t *testing.T, f *Family) []promlint.Problem {
	t.Helper()
	mf := &dto.MetricFamily{Name: &f.Name, Help: proto.String("help")}
	switch f.Type {
	case Counter:
		mf.Type = dto.MetricType_COUNTER.Enum()
		mf.Metric = []*dto.Metric{{Counter: &dto.Counter{Value: proto.Float64(1)}}}
	default:
		mf.Type = dto.MetricType_GAUGE.Enum()
		mf.Metric = []*dto.Metric{{Gauge: &dto.Gauge{Value: proto.Float64(1)}}}
	}
	problems, err := promlint.NewWithMetricFamilies([]*dto.MetricFamily{mf}).Lint()
	if err != nil {
		t.Fatal(err)
	}
	return problems
}

func TestMapAllClashes(t *testing.T) {
	metrics := []source.Metric{
		{Name: "types.double_counter", Desc: desc(semantics.TypeDouble, semantics.SemCounter, msec)},
		{Name: "types.double", Desc: desc(semantics.TypeDouble, semantics.SemInstant, semantics.Units{DimTime: 1})},
		{Name: "disk.wait", Desc: desc(semantics.TypeU32, semantics.SemInstant, msec)},
		{Name: "disk.wait.ms", Desc: desc(semantics.TypeU32, semantics.SemInstant, msec)},
		{Name: "a.b", Desc: desc(semantics.Type32, semantics.SemInstant, semantics.Units{})},
		{Name: "a-b", Desc: desc(semantics.Type32, semantics.SemInstant, semantics.Units{})},
		{Name: "a_b", Desc: desc(semantics.Type32, semantics.SemInstant, semantics.Units{})},
		{Name: "x.agg", Desc: desc(semantics.TypeAggregate, semantics.SemInstant, semantics.Units{})},
	}
	m, _ := New(nil, Options{})
	for round := 0; round < 2; round++ {
		fams, skipped := m.MapAll(metrics, nil)
		var names []string
		for _, f := range fams {
			names = append(names, f.PCPName+"="+f.Name)
		}
		// the fallback of a clashing lint-clean name: the type word as PCP's
		// semantics word, the unit words kept
		want := []string{"a-b=a_b", "disk.wait=disk_wait_seconds", "disk.wait.ms=disk_wait_ms_seconds", "types.double=types_double_seconds", "types.double_counter=types_double_cumulative_seconds_total"}
		if !reflect.DeepEqual(names, want) {
			t.Errorf("families %v, want %v", names, want)
		}
		wantSkip := []Skipped{
			{"a.b", SkipNameClash, "a_b is already the name of a-b"},
			{"a_b", SkipNameClash, "a_b is already the name of a-b"},
			{"x.agg", SkipAggregate, ""},
		}
		if !reflect.DeepEqual(skipped, wantSkip) {
			t.Errorf("skipped %+v, want %+v", skipped, wantSkip)
		}
		// The same answer whatever the input order.
		metrics[0], metrics[len(metrics)-1] = metrics[len(metrics)-1], metrics[0]
	}
	// Across sources with one Namespace: the first source keeps the name.
	var ns Namespace
	m.MapAll(metrics[:2], &ns)
	fams, skipped := m.MapAll([]source.Metric{{Name: "types.double", Desc: desc(semantics.TypeDouble, semantics.SemInstant, semantics.Units{DimTime: 1})}}, &ns)
	if len(fams) != 0 || len(skipped) != 1 || skipped[0].Reason != SkipNameClash {
		t.Errorf("second source: %v %v", fams, skipped)
	}
}

func lbl(level semantics.LabelType, name, value string) semantics.Label {
	return semantics.Label{Name: name, Value: value, Flags: level}
}

func TestLabels(t *testing.T) {
	md := source.Metric{Name: "m.x", Desc: semantics.Desc{Type: semantics.TypeU32, Sem: semantics.SemCounter, InDom: semantics.NewInDom(70, 1)},
		Labels: semantics.LabelSet{
			lbl(semantics.LabelItem, "__name__", `"evil"`),
			lbl(semantics.LabelItem, "agent", `"mmv"`),
			lbl(semantics.LabelContext, "hostname", `"vm"`),
			lbl(semantics.LabelItem, "instance", `"i"`),
			lbl(semantics.LabelItem, "instname", `"pcp says"`),
			lbl(semantics.LabelItem, "job", `"j"`),
			lbl(semantics.LabelCluster, "limits", `{"hi":1.5,"lo":0}`),
			lbl(semantics.LabelItem, "nothing", `null`),
			lbl(semantics.LabelItem, "num", `42`),
			lbl(semantics.LabelItem, "flag", `false`),
			lbl(semantics.LabelItem, "tags", `["a", "b",3]`),
			lbl(semantics.LabelItem, "weird-name.x", `"tab\there \"q\" \u00e9 \\"`),
		}}
	inst := source.Instance{ID: 20, Name: "green light", Labels: semantics.LabelSet{lbl(semantics.LabelInstances, "agent", `"override"`), lbl(semantics.LabelInstances, "wavelength_nm", `530`)}}
	full := true
	m, _ := New(nil, Options{FullLabels: &full})
	f, _ := m.Map(&md)
	got := f.Labels(&inst)
	want := []LabelPair{
		{"agent", "override"}, {"flag", "false"}, {"hostname", "vm"}, {"instname", "green light"},
		{"limits_hi", "1.5"}, {"limits_lo", "0"}, {"nothing", "null"}, {"num", "42"},
		{"pcp___name__", "evil"}, {"pcp_instance", "i"}, {"pcp_instname", "pcp says"}, {"pcp_job", "j"},
		{"tags", `["a","b",3]`}, {"wavelength_nm", "530"}, {"weird_name_x", "tab\there \"q\" é \\"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("default labels:\n got %v\nwant %v", got, want)
	}
	// Singular: no instname.
	if got := f.Labels(nil); len(got) != len(want)-2 {
		t.Errorf("singular labels %v", got)
	}
	// pmproxy keeps PCP's instname, adds instid, and no pcp_ prefix.
	p := NamingPmproxy
	mp, _ := New(nil, Options{Naming: &p})
	fp, _ := mp.Map(&md)
	gotp := fp.Labels(&inst)
	wantp := []LabelPair{
		{"__name__", "evil"}, {"agent", "override"}, {"flag", "false"}, {"hostname", "vm"}, {"instance", "i"}, {"instid", "20"}, {"instname", "pcp says"},
		{"job", "j"}, {"limits_hi", "1.5"}, {"limits_lo", "0"}, {"nothing", "null"}, {"num", "42"},
		{"tags", `["a","b",3]`}, {"wavelength_nm", "530"}, {"weird_name_x", "tab\there \"q\" é \\"},
	}
	if !reflect.DeepEqual(gotp, wantp) {
		t.Errorf("pmproxy labels:\n got %v\nwant %v", gotp, wantp)
	}
	// Info metrics reserve "value"; instid on request; keep/drop.
	cfg, err := ParseConfig([]byte("instid: true\ndrop_labels: [hostname]\n"))
	if err != nil {
		t.Fatal(err)
	}
	mi, _ := New(cfg, Options{FullLabels: &full, ExtraLabels: []LabelPair{{"hostname", "extra"}, {"domainname", "d"}}})
	sd := source.Metric{Name: "m.s", Desc: desc(semantics.TypeString, semantics.SemDiscrete, semantics.Units{}), Labels: semantics.LabelSet{lbl(semantics.LabelItem, "value", `"v"`)}}
	fi, _ := mi.Map(&sd)
	goti := fi.Labels(&source.Instance{ID: -5, Name: "bad\xffutf8"})
	wanti := []LabelPair{{"domainname", "d"}, {"instid", "-5"}, {"instname", "bad\uFFFDutf8"}, {"pcp_value", "v"}}
	if !reflect.DeepEqual(goti, wanti) {
		t.Errorf("info labels:\n got %v\nwant %v", goti, wanti)
	}
	cfg, _ = ParseConfig([]byte("full_labels: true\nkeep_labels: [instname, num]\n"))
	mk, _ := New(cfg, Options{})
	fk, _ := mk.Map(&md)
	if got := fk.Labels(&inst); !reflect.DeepEqual(got, []LabelPair{{"instname", "green light"}, {"num", "42"}}) {
		t.Errorf("keep_labels: %v", got)
	}
}

func TestSanitize(t *testing.T) {
	cases := []struct{ in, metric, label string }{
		{"kernel.all.load", "kernel_all_load", "kernel_all_load"},
		{"a:b", "a:b", "a_b"},
		{"", "_", "_"},
		{"0abc", "_0abc", "_0abc"},
		{"café✓", "caf__", "caf__"},
		{"x\xff\xfey", "x__y", "x__y"},
		{"A_z09", "A_z09", "A_z09"},
	}
	for _, c := range cases {
		if got := SanitizeMetricName(c.in); got != c.metric {
			t.Errorf("SanitizeMetricName(%q) = %q, want %q", c.in, got, c.metric)
		}
		if got := SanitizeLabelName(c.in); got != c.label {
			t.Errorf("SanitizeLabelName(%q) = %q, want %q", c.in, got, c.label)
		}
	}
	// Every byte: the result is always a valid name.
	for b := 0; b < 256; b++ {
		s := "a" + string([]byte{byte(b)}) + "z"
		n := SanitizeMetricName(s)
		for i := 0; i < len(n); i++ {
			if !validNameByte(n[i], true, i == 0) {
				t.Fatalf("byte %#x: %q is not a valid metric name", b, n)
			}
		}
		if strings.Count(n, "") != 4 {
			t.Errorf("byte %#x: %q", b, n)
		}
	}
}

func TestLabelValueEveryByte(t *testing.T) {
	// A JSON string label value holding any byte (escaped as JSON requires)
	// comes out as valid UTF-8 with that character.
	for b := 0; b < 128; b++ {
		raw := `"a` + jsonEscape(byte(b)) + `z"`
		got := labelValue(raw)
		if want := "a" + string(rune(b)) + "z"; got != want {
			t.Errorf("byte %#x: %q -> %q, want %q", b, raw, got, want)
		}
	}
	for b := 128; b < 256; b++ {
		got := labelValue(`"a` + string([]byte{byte(b)}) + `z"`)
		if got != "a\uFFFDz" {
			t.Errorf("byte %#x: %q", b, got)
		}
	}
}

func jsonEscape(b byte) string {
	switch {
	case b == '"':
		return `\"`
	case b == '\\':
		return `\\`
	case b < 0x20:
		return `\u00` + string("0123456789abcdef"[b>>4]) + string("0123456789abcdef"[b&15])
	}
	return string([]byte{b})
}

func TestInstrument(t *testing.T) {
	m, _ := New(nil, Options{})
	cases := []struct {
		md   source.Metric
		want Instrument
	}{
		{source.Metric{Name: "disk.dev.read_bytes", Desc: desc(semantics.TypeU64, semantics.SemCounter, kbyte), OneLine: "h"},
			Instrument{Name: "disk.dev.read_bytes", Unit: "By", Description: "h", Kind: KindSum, Monotonic: true, Scale: 1024}},
		{source.Metric{Name: "kernel.all.load", Desc: desc(semantics.TypeFloat, semantics.SemInstant, semantics.Units{}), OneLine: "l"},
			Instrument{Name: "kernel.all.load", Unit: "1", Description: "l", Kind: KindGauge, Scale: 1}},
		{source.Metric{Name: "x.rate", Desc: desc(semantics.TypeDouble, semantics.SemInstant, kbPerSec), OneLine: "r"},
			Instrument{Name: "x.rate", Unit: "By/s", Description: "r", Kind: KindGauge, Scale: 1024}},
		{source.Metric{Name: "x.count", Desc: desc(semantics.TypeU64, semantics.SemCounter, count), OneLine: "c"},
			Instrument{Name: "x.count", Unit: "{count}", Description: "c", Kind: KindSum, Monotonic: true, Scale: 1}},
		{source.Metric{Name: "kernel.uname.release", Desc: desc(semantics.TypeString, semantics.SemDiscrete, semantics.Units{}), OneLine: "s"},
			Instrument{Name: "kernel.uname.release", Unit: "1", Description: "s", Kind: KindGauge, Scale: 1, String: true}},
	}
	for _, c := range cases {
		got, why := m.Instrument(&c.md)
		got.fam = nil
		if why != "" || got != c.want {
			t.Errorf("%s: %+v %q, want %+v", c.md.Name, got, why, c.want)
		}
	}
	md := source.Metric{Name: "m", Desc: desc(semantics.TypeU32, semantics.SemInstant, semantics.Units{}), Labels: semantics.LabelSet{
		lbl(semantics.LabelContext, "hostname", `"vm"`), lbl(semantics.LabelContext, "machineid", `"abc"`), lbl(semantics.LabelContext, "userid", `0`),
		lbl(semantics.LabelDomain, "agent", `"mmv"`), lbl(semantics.LabelItem, "unit_hint", `"ns"`)}}
	md.Desc.InDom = semantics.NewInDom(70, 1)
	ms := []source.Metric{md}
	res := Resource(ms, m.TargetLabels(ms, nil))
	if want := []LabelPair{{"host.id", "abc"}, {"host.name", "vm"}, {"pcp.agent", "mmv"}, {"pcp.userid", "0"}, {"service.instance.id", "vm"}, {"service.name", "pcp"}}; !reflect.DeepEqual(res, want) {
		t.Errorf("resource %v, want %v", res, want)
	}
	// full labels or not, the attributes are the lean ones
	full := true
	mf, _ := New(nil, Options{FullLabels: &full})
	for _, mm := range []*Mapper{m, mf} {
		in, _ := mm.Instrument(&md)
		inst := source.Instance{ID: 3, Name: "three", Labels: semantics.LabelSet{lbl(semantics.LabelInstances, "name", `"three"`), lbl(semantics.LabelInstances, "slot", `"s3"`)}}
		if attrs := in.Attributes(&inst); !reflect.DeepEqual(attrs, []LabelPair{{"instname", "three"}, {"slot", "s3"}}) {
			t.Errorf("attributes %v", attrs)
		}
	}
	mmv := []source.Metric{{Name: "mmv.shop.requests"}, {Name: "mmv.shop.latency"}}
	if res := Resource(mmv, []LabelPair{{"hostname", "h"}}); !reflect.DeepEqual(res, []LabelPair{{"host.name", "h"}, {"service.instance.id", "h"}, {"service.name", "shop"}}) {
		t.Errorf("MMV resource %v", res)
	}

}

// TestLeanLabels: the default series carry the instance, its own labels
// (not one repeating the instance name) and the target labels that differ
// between sources; the rest of the context and domain labels are target
// labels, indom, cluster and item labels are left out unless series_labels
// names them.
func TestLeanLabels(t *testing.T) {
	ctx := func(host string) semantics.LabelSet {
		return semantics.LabelSet{
			lbl(semantics.LabelDomain, "agent", `"linux"`),
			lbl(semantics.LabelCluster, "device_type", `"block"`),
			lbl(semantics.LabelContext, "domainname", `"localdomain"`),
			lbl(semantics.LabelContext, "groupid", `0`),
			lbl(semantics.LabelContext, "hostname", `"`+host+`"`),
			lbl(semantics.LabelInDom, "indom_name", `"per disk"`),
			lbl(semantics.LabelContext, "job", `"j"`),
			lbl(semantics.LabelContext, "userid", `0`),
		}
	}
	disk := func(host string) []source.Metric {
		return []source.Metric{
			{Name: "disk.dev.read", Desc: semantics.Desc{Type: semantics.TypeU64, Sem: semantics.SemCounter, InDom: semantics.NewInDom(60, 1)}, Labels: ctx(host)},
			{Name: "kernel.all.load", Desc: semantics.Desc{Type: semantics.TypeFloat, Sem: semantics.SemInstant}, Labels: ctx(host)[2:]},
		}
	}
	pmcd := source.Metric{Name: "pmcd.numagents", Desc: semantics.Desc{Type: semantics.TypeU32, Sem: semantics.SemInstant},
		Labels: semantics.LabelSet{lbl(semantics.LabelDomain, "agent", `"pmcd"`), lbl(semantics.LabelContext, "hostname", `"a"`)}}
	sda := source.Instance{ID: 0, Name: "sda", Labels: semantics.LabelSet{
		lbl(semantics.LabelInstances, "device_name", `"sda"`), lbl(semantics.LabelInstances, "wwn", `"x1"`)}}
	cases := []struct {
		name    string
		cfg     string
		sources [][]source.Metric
		extra   []LabelPair
		target  []LabelPair
		series  []LabelPair // disk.dev.read of sda, first source
		load    []LabelPair // kernel.all.load, first source
	}{
		{name: "one source", sources: [][]source.Metric{disk("a")},
			target: []LabelPair{{"agent", "linux"}, {"domainname", "localdomain"}, {"groupid", "0"}, {"hostname", "a"}, {"pcp_job", "j"}, {"userid", "0"}},
			series: []LabelPair{{"instname", "sda"}, {"wwn", "x1"}}},
		{name: "two hosts keep hostname", sources: [][]source.Metric{disk("a"), disk("b")},
			target: []LabelPair{{"agent", "linux"}, {"domainname", "localdomain"}, {"groupid", "0"}, {"hostname", "a"}, {"pcp_job", "j"}, {"userid", "0"}},
			series: []LabelPair{{"hostname", "a"}, {"instname", "sda"}, {"wwn", "x1"}},
			load:   []LabelPair{{"hostname", "a"}}},
		{name: "one host, other context: one target", sources: [][]source.Metric{disk("a"), {{Name: "x.y", Desc: semantics.Desc{Type: semantics.TypeU32}, Labels: semantics.LabelSet{lbl(semantics.LabelContext, "hostname", `"a"`)}}}},
			target: []LabelPair{{"agent", "linux"}, {"domainname", "localdomain"}, {"groupid", "0"}, {"hostname", "a"}, {"pcp_job", "j"}, {"userid", "0"}},
			series: []LabelPair{{"instname", "sda"}, {"wwn", "x1"}}},
		{name: "agents differ: no agent", sources: [][]source.Metric{append(disk("a"), pmcd)},
			target: []LabelPair{{"domainname", "localdomain"}, {"groupid", "0"}, {"hostname", "a"}, {"pcp_job", "j"}, {"userid", "0"}},
			series: []LabelPair{{"instname", "sda"}, {"wwn", "x1"}}},
		{name: "series_labels and drop_labels", cfg: "series_labels: [device_type, device_name]\ndrop_labels: [userid, wwn]\ninstid: true\n", sources: [][]source.Metric{disk("a")},
			target: []LabelPair{{"agent", "linux"}, {"domainname", "localdomain"}, {"groupid", "0"}, {"hostname", "a"}, {"pcp_job", "j"}},
			series: []LabelPair{{"device_name", "sda"}, {"device_type", "block"}, {"instid", "0"}, {"instname", "sda"}}},
		{name: "extra context below the source's", sources: [][]source.Metric{disk("a")}, extra: []LabelPair{{"hostname", "exporter"}, {"service", "s"}},
			target: []LabelPair{{"agent", "linux"}, {"domainname", "localdomain"}, {"groupid", "0"}, {"hostname", "a"}, {"pcp_job", "j"}, {"service", "s"}, {"userid", "0"}},
			series: []LabelPair{{"instname", "sda"}, {"wwn", "x1"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(c.cfg))
			if err != nil {
				t.Fatal(err)
			}
			m, _ := New(cfg, Options{})
			var targets [][]LabelPair
			for _, ms := range c.sources {
				targets = append(targets, m.TargetLabels(ms, c.extra))
			}
			if !reflect.DeepEqual(targets[0], c.target) {
				t.Errorf("target\n got %v\nwant %v", targets[0], c.target)
			}
			fams, _ := m.MapSource(c.sources[0], targets[0], NewNamespace(targets...))
			if got := fams[0].Labels(&sda); !reflect.DeepEqual(got, c.series) {
				t.Errorf("disk series\n got %v\nwant %v", got, c.series)
			}
			if got := fams[1].Labels(nil); len(got)+len(c.load) > 0 && !reflect.DeepEqual(got, c.load) {
				t.Errorf("load series\n got %v\nwant %v", got, c.load)
			}
		})
	}
}

// TestPmproxyLabels: pmproxy's /metrics has no agent, userid or groupid,
// whether or not an archive kept their optional flag.
func TestPmproxyLabels(t *testing.T) {
	md := source.Metric{Name: "disk.dev.read", Desc: semantics.Desc{Type: semantics.TypeU64, Sem: semantics.SemCounter}, Labels: semantics.LabelSet{
		lbl(semantics.LabelDomain, "agent", `"linux"`),
		lbl(semantics.LabelContext, "groupid", `0`),
		lbl(semantics.LabelContext, "hostname", `"vm"`),
		lbl(semantics.LabelItem, "agent_x", `"kept"`),
		lbl(semantics.LabelContext|semantics.LabelOptional, "opt", `"o"`),
		lbl(semantics.LabelContext, "userid", `0`),
	}}
	p := NamingPmproxy
	m, _ := New(nil, Options{Naming: &p})
	f, _ := m.Map(&md)
	if got, want := f.Labels(nil), []LabelPair{{"agent_x", "kept"}, {"hostname", "vm"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

package mapping

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// Naming selects how PCP metrics are named and labelled.
type Naming int

const (
	// NamingDefault follows Prometheus conventions (base units, unit suffix,
	// _total, _info for strings).
	NamingDefault Naming = iota
	// NamingPmproxy reproduces pmproxy's /metrics names and labels.
	NamingPmproxy
	// NamingNode is the default naming with the linux agent's host metrics
	// under node_exporter's names and labels (see NodeSource).
	NamingNode
	// NamingHostmetrics is the default naming with the linux agent's host
	// metrics as the OpenTelemetry Collector hostmetrics receiver's
	// metrics (system.cpu.time{cpu,state}, ...; see hostmetrics.go).
	NamingHostmetrics
)

// ParseNaming parses "default" (or ""), "pmproxy", "node" and
// "hostmetrics".
func ParseNaming(s string) (Naming, error) {
	switch s {
	case "", "default":
		return NamingDefault, nil
	case "pmproxy":
		return NamingPmproxy, nil
	case "node":
		return NamingNode, nil
	case "hostmetrics":
		return NamingHostmetrics, nil
	}
	return 0, fmt.Errorf("unknown naming %q (want default, pmproxy, node or hostmetrics)", s)
}

// Namings returns every naming, in the order of ParseNaming's.
func Namings() []Naming {
	return []Naming{NamingDefault, NamingPmproxy, NamingNode, NamingHostmetrics}
}

// String returns the naming's flag value ("default", "pmproxy", "node" or
// "hostmetrics").
func (n Naming) String() string {
	switch n {
	case NamingPmproxy:
		return "pmproxy"
	case NamingNode:
		return "node"
	case NamingHostmetrics:
		return "hostmetrics"
	}
	return "default"
}

// Type is a Prometheus metric type.
type Type int

// Prometheus metric types used by the mapping.
const (
	Counter Type = iota
	Gauge
	Info // a STRING metric: <name>_info{value="..."} 1 (a gauge in text format 0.0.4)
	// Untyped is a family typed untyped (unknown in OpenMetrics), as
	// node_exporter types its netstat and vmstat counters.
	Untyped
)

// String returns the type's name: "counter", "gauge" or "info".
func (t Type) String() string {
	switch t {
	case Counter:
		return "counter"
	case Info:
		return "info"
	case Untyped:
		return "untyped"
	}
	return "gauge"
}

// SkipReason says why a PCP metric has no Prometheus family.
type SkipReason string

// Reasons for skipping a metric (the reason label of the skipped self-metric).
const (
	SkipAggregate   SkipReason = "aggregate"        // AGGREGATE and AGGREGATE_STATIC values
	SkipEvent       SkipReason = "event"            // EVENT and HIGHRES_EVENT values
	SkipString      SkipReason = "string"           // STRING with the pmproxy naming (pmproxy omits them)
	SkipUnsupported SkipReason = "unsupported_type" // NOSUPPORT or an unknown type
	SkipExcluded    SkipReason = "excluded"         // by the include/exclude patterns of the configuration
	SkipNameClash   SkipReason = "name_clash"       // another metric already has the name
)

// InfoValueLabel is the label that carries a STRING metric's value.
const InfoValueLabel = "value"

// Family is the Prometheus form of one PCP metric.
type Family struct {
	PCPName string
	// OTelName is the OpenTelemetry instrument's name: PCP's dotted name,
	// or the rename of the configuration.
	OTelName string
	Desc     semantics.Desc
	// Name is the name of the samples and of the family in text format
	// 0.0.4: "disk_dev_read_bytes_total", "kernel_uname_release_info".
	Name string
	// OMName is the OpenMetrics family name: Name without _total (counters)
	// or _info (info metrics).
	OMName string
	Type   Type
	// Help is the HELP text ("" for none).
	Help string
	// Unit is the OpenMetrics unit ("bytes", "seconds", ...) when OMName
	// ends with it, else "".
	Unit string
	// Scale multiplies PCP values into the unit (1 with the pmproxy naming),
	// as libpcp's pmConvScale does (Unit.Convert).
	Scale float64
	// UCUM is the OpenTelemetry unit of the converted values.
	UCUM string

	naming             Naming
	node               bool        // a NodeSource family: named verbatim, labelled by its instances
	prof               *nodeFamily // its row in the naming's table
	altName, altOMName string      // fallback names when Name or OMName clash
	integer            bool        // values print as exact integers
	labels             []LabelPair // raw PCP metric labels, flattened
	m                  *Mapper
	target             []LabelPair     // the target labels of its source (lean labels)
	distinct           map[string]bool // target labels the series keep
}

// Skipped is a metric without a family and the reason.
type Skipped struct {
	PCPName string
	Reason  SkipReason
	Detail  string
}

// Mapper maps PCP metrics with one naming and configuration. It is safe for
// concurrent use.
type Mapper struct {
	naming Naming
	cfg    Config
	keep   map[string]bool
	drop   map[string]bool
	full   bool            // every PCP label on every series
	series map[string]bool // series_labels: kept on lean series
	// extra labels merged below every metric's own (lowest precedence), e.g.
	// the context labels pmcd would add.
	extra []LabelPair
	// the secret and lean-default rules (lean.go)
	named     map[string]bool
	with      map[string]bool
	selection func(string) bool
	// opts are the options the Mapper was made with (WithNaming)
	opts Options
}

// Options are the settings of a Mapper besides its configuration file.
type Options struct {
	// Naming overrides the configuration's naming when set (the --naming flag).
	Naming *Naming
	// ExtraLabels are added to every series with the lowest precedence (as
	// PCP context labels would be); with lean labels, to the target labels.
	ExtraLabels []LabelPair
	// FullLabels overrides the configuration's full_labels when set (the
	// --mapping.full-labels flag).
	FullLabels *bool
	// Named are PCP names written out whole in a selection (--pmcd.metrics):
	// the secret and lean-default rules do not leave them out (lean.go).
	Named []string
	// With are LeanDefault entries turned on (--mapping.with).
	With []string
	// Selected reports whether a selection's include pattern takes a PCP
	// name (--pmcd.metrics); LeanDefault's subtrees do not leave out what
	// it takes.
	Selected func(name string) bool
}

// New returns a Mapper for a configuration (nil for the defaults).
func New(cfg *Config, opts Options) (*Mapper, error) {
	m := &Mapper{opts: opts}
	if cfg != nil {
		m.cfg = *cfg
	}
	n, err := ParseNaming(m.cfg.Naming)
	if err != nil {
		return nil, err
	}
	if opts.Naming != nil {
		n = *opts.Naming
	}
	m.naming = n
	if len(m.cfg.KeepLabels) > 0 {
		m.keep = map[string]bool{}
		for _, l := range m.cfg.KeepLabels {
			m.keep[l] = true
		}
	}
	if len(m.cfg.DropLabels) > 0 {
		m.drop = map[string]bool{}
		for _, l := range m.cfg.DropLabels {
			m.drop[l] = true
		}
	}
	m.extra = opts.ExtraLabels
	m.full = m.cfg.FullLabels
	if opts.FullLabels != nil {
		m.full = *opts.FullLabels
	}
	m.series = map[string]bool{}
	for _, l := range m.cfg.SeriesLabels {
		m.series[l] = true
	}
	if err := m.setLean(opts); err != nil {
		return nil, err
	}
	return m, nil
}

// Naming returns the mapper's naming.
func (m *Mapper) Naming() Naming { return m.naming }

// WithNaming is a Mapper of the same configuration and options but naming
// n (a /probe module's naming).
func (m *Mapper) WithNaming(n Naming) (*Mapper, error) {
	if n == m.naming {
		return m, nil
	}
	o := m.opts
	o.Naming = &n
	return New(&m.cfg, o)
}

// Selected reports whether the include/exclude patterns keep a PCP name.
func (m *Mapper) Selected(name string) bool {
	if len(m.cfg.Include) > 0 {
		ok := false
		for i := range m.cfg.Include {
			if m.cfg.Include[i].Match(name) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	for i := range m.cfg.Exclude {
		if m.cfg.Exclude[i].Match(name) {
			return false
		}
	}
	return true
}

// baseName applies the rename rules; it reports whether one matched.
func (m *Mapper) baseName(pcp string) (string, bool) {
	for _, r := range m.cfg.Rename {
		if r.Match.re == nil {
			if r.Match.Match(pcp) {
				return r.Name, true
			}
			continue
		}
		if idx := r.Match.re.FindStringSubmatchIndex(pcp); idx != nil {
			return string(r.Match.re.ExpandString(nil, r.Name, pcp, idx)), true
		}
	}
	return pcp, false
}

// Map maps one metric, or says why it is skipped (never SkipNameClash: that
// needs the other metrics, see MapAll).
func (m *Mapper) Map(md *source.Metric) (Family, SkipReason) {
	if !m.Selected(md.Name) {
		return Family{}, SkipExcluded
	}
	if why := m.leanRule(md); why != "" {
		return Family{}, why
	}
	d := md.Desc
	switch d.Type {
	case semantics.Type32, semantics.TypeU32, semantics.Type64, semantics.TypeU64, semantics.TypeFloat, semantics.TypeDouble, semantics.TypeString:
	case semantics.TypeAggregate, semantics.TypeAggregateStatic:
		return Family{}, SkipAggregate
	case semantics.TypeEvent, semantics.TypeHighresEvent:
		return Family{}, SkipEvent
	default:
		return Family{}, SkipUnsupported
	}
	f := Family{PCPName: md.Name, Desc: d, naming: m.naming, m: m, Scale: 1}
	f.OTelName, _ = m.baseName(md.Name)
	if nf := m.naming.profile().familyOf(md); nf != nil {
		return nf.family(f, md), ""
	}
	f.labels = pcpPairs(labelsFor(m.naming, md.Labels), nil)
	base, renamed := m.baseName(md.Name)
	name := SanitizeMetricName(base)
	unit := BaseUnit(d.Units)
	f.UCUM = unit.UCUM
	if m.naming == NamingPmproxy {
		if d.Type == semantics.TypeString {
			return Family{}, SkipString
		}
		f.Type = Counter
		if d.Sem == semantics.SemInstant || d.Sem == semantics.SemDiscrete {
			f.Type = Gauge
		}
		f.Name, f.OMName = name, name
		f.Help = md.OneLine
		f.UCUM = "" // values are not converted
		f.integer = d.Type != semantics.TypeFloat && d.Type != semantics.TypeDouble
		return f, ""
	}
	f.Help = helpText(md)
	if !renamed {
		// promtool's lint: names in snake_case (PCP has mem.util.commitLimit),
		// no abbreviated units (disk.dev.d_await).
		name = expandAbbreviations(snakeCase(name))
	}
	switch {
	case d.Type == semantics.TypeString:
		f.Type = Info
		f.UCUM = ""
		if !renamed {
			// a string has no unit: PCP's trailing _s means "as a
			// string" (proc.psinfo.blocked_s), which promtool's lint
			// would read as seconds once _info follows
			if base, ok := strings.CutSuffix(name, "_s"); ok && base != "" {
				name = base + "_string"
			}
		}
		f.OMName = strings.TrimSuffix(name, "_info")
		f.Name = f.OMName + "_info"
		return f, ""
	case d.Sem == semantics.SemCounter:
		f.Type = Counter
	default:
		f.Type = Gauge
	}
	f.Scale = unit.Scale
	f.integer = unit.Scale == 1 && d.Type != semantics.TypeFloat && d.Type != semantics.TypeDouble
	if renamed {
		f.Name, f.OMName, f.Unit = promNames(name, f.Type, unit.Suffix)
		return f, ""
	}
	// promtool's lint: no unit words other than the base unit's (the value
	// is converted and the suffix says the unit), no type word, and the
	// suffixes _total, _count, _sum and _bucket only where they belong. The
	// name keeping its unit words, and the type word in another form, is
	// the fallback for a clash ("types.double_counter" next to the gauge
	// "types.double").
	clean := dropTypeWord(dropUnitWords(name, d.Units), f.Type.String(), false)
	f.Name, f.OMName, f.Unit = f.names(clean, unit.Suffix)
	if clean != name {
		f.altName, f.altOMName, _ = f.names(dropTypeWord(name, f.Type.String(), true), unit.Suffix)
	} else if f.Type == Counter && strings.HasSuffix(clean, "_total") {
		// a counter named ..._total loses the word to the counter suffix;
		// next to the counter without it (mem.vmstat.pgscan_direct and
		// pgscan_direct_total) its last components are joined instead,
		// as a gauge's are: mem_vmstat_pgscan_directtotal_total
		f.altName, f.altOMName, _ = f.names(joinReservedSuffix(clean), unit.Suffix)
	}
	return f, ""
}

// names returns promNames of a name cleaned for promtool's lint: a gauge
// whose name would end in a suffix reserved for other types gets its last
// components joined (mem.util.hugepagesTotal becomes
// mem_util_hugepagestotal, vfs.inodes.count vfs_inodescount).
func (f *Family) names(name, suffix string) (text, om, unit string) {
	text, om, unit = promNames(name, f.Type, suffix)
	if f.Type == Gauge {
		if j := joinReservedSuffix(text); j != text {
			return promNames(joinReservedSuffix(name), f.Type, suffix)
		}
	}
	return text, om, unit
}

// promNames returns the sample (text format) name, the OpenMetrics family
// name and the OpenMetrics unit of a base name.
func promNames(name string, t Type, suffix string) (text, om, unit string) {
	if t == Counter {
		name = strings.TrimSuffix(name, "_total")
	}
	name = appendSuffix(name, suffix)
	if suffix != "" && strings.HasSuffix(name, "_"+suffix) {
		unit = suffix
	}
	text = name
	if t == Counter {
		text += "_total"
	}
	return text, name, unit
}

// helpText is the one-line help, else the first line of the long help, else
// a description built from the descriptor (promtool asks for HELP).
func helpText(md *source.Metric) string {
	if md.OneLine != "" {
		return md.OneLine
	}
	if h := strings.TrimSpace(md.Help); h != "" {
		if i := strings.IndexByte(h, '\n'); i >= 0 {
			h = strings.TrimSpace(h[:i])
		}
		return h
	}
	return "PCP metric " + md.Name
}

// Namespace records the names already taken, to resolve clashes across
// several MapAll calls (several sources served together), and the target
// labels whose values tell those sources apart.
type Namespace struct {
	owner    map[string]nameOwner // Prometheus name -> its first family
	sharers  map[string]bool      // name and key of each source sharing a name
	distinct map[string]bool
}

// nameOwner is the family that took a name first, and the source it came
// from (key: the values of its distinct target labels).
type nameOwner struct {
	pcp, key, help string
	typ            Type
	unit           string
}

// key is the values of target's distinct labels: sources told apart by
// them (several hosts) have different keys.
func (ns *Namespace) key(target []LabelPair) string {
	var b strings.Builder
	for _, p := range target {
		if ns.distinct[p.Name] {
			b.WriteString(p.Name)
			b.WriteByte('=')
			b.WriteString(p.Value)
			b.WriteByte(0)
		}
	}
	return b.String()
}

// shares reports whether f, of a source whose key is key, may share its
// names with the families that took them: the same PCP metric, of the
// same type and unit, from sources told apart by their distinct target
// labels (several pmcds of different hosts: their series differ by
// hostname and come in one family). It returns the help the family takes
// (the first owner's, so that the family has one).
func (ns *Namespace) shares(f *Family, key string) (string, bool) {
	if key == "" {
		return "", false
	}
	help := ""
	for i, n := range []string{f.Name, f.OMName} {
		o, ok := ns.owner[n]
		if !ok || o.pcp != f.PCPName || o.key == key || o.typ != f.Type || o.unit != f.Unit || ns.sharers[n+"\x00"+key] {
			return "", false
		}
		if i == 0 {
			help = o.help
		}
	}
	return help, true
}

// NewNamespace returns the namespace of one output whose sources have these
// target labels (TargetLabels): the labels whose values differ between
// them stay on the series (Distinct).
func NewNamespace(targets ...[]LabelPair) *Namespace {
	return &Namespace{owner: map[string]nameOwner{}, distinct: Distinct(targets...)}
}

// clash describes why either name is taken, or returns "".
func (ns *Namespace) clash(names ...string) string {
	for _, n := range names {
		if o, ok := ns.owner[n]; ok {
			return fmt.Sprintf("%s is already the name of %s", n, o.pcp)
		}
	}
	return ""
}

// MapAll maps a source's metrics. Families come in PCP name order; a metric
// whose names (text or OpenMetrics family name) are already taken, in ns
// (which may be nil) or by an earlier metric in PCP name order, is skipped
// with SkipNameClash and a detail naming the winner.
func (m *Mapper) MapAll(metrics []source.Metric, ns *Namespace) ([]Family, []Skipped) {
	return m.MapSource(metrics, m.TargetLabels(metrics, nil), ns)
}

// MapSource is MapAll for a source whose target labels are given (the
// source's TargetLabels with its extra context).
func (m *Mapper) MapSource(metrics []source.Metric, target []LabelPair, ns *Namespace) ([]Family, []Skipped) {
	if ns == nil {
		ns = &Namespace{}
	}
	if ns.owner == nil {
		ns.owner = map[string]nameOwner{}
	}
	key := ns.key(target)
	idx := make([]int, len(metrics))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return metrics[idx[a]].Name < metrics[idx[b]].Name })
	var fams []Family
	var skipped []Skipped
	for _, i := range idx {
		md := &metrics[i]
		f, why := m.Map(md)
		if why != "" {
			skipped = append(skipped, Skipped{PCPName: md.Name, Reason: why})
			continue
		}
		clash := ns.clash(f.Name, f.OMName)
		shared := false
		if clash != "" {
			var help string
			if help, shared = ns.shares(&f, key); shared {
				f.Help, clash = help, ""
			}
		}
		if clash != "" && f.altName != "" && ns.clash(f.altName, f.altOMName) == "" {
			f.Name, f.OMName, clash = f.altName, f.altOMName, ""
		}
		if clash != "" {
			skipped = append(skipped, Skipped{md.Name, SkipNameClash, clash})
			continue
		}
		if shared {
			if ns.sharers == nil {
				ns.sharers = map[string]bool{}
			}
			ns.sharers[f.Name+"\x00"+key] = true
			ns.sharers[f.OMName+"\x00"+key] = true
		} else {
			o := nameOwner{pcp: md.Name, key: key, help: f.Help, typ: f.Type, unit: f.Unit}
			ns.owner[f.Name] = o
			ns.owner[f.OMName] = o
		}
		if m.Lean() {
			f.target, f.distinct = target, ns.distinct
		}
		fams = append(fams, f)
	}
	return fams, skipped
}

// Labels returns the sorted label set of one series of f. With lean labels
// (the default) that is the instance and its own labels, plus the target
// labels that tell the output's sources apart (see Lean). With full labels
// or the pmproxy naming it is the metric's PCP labels (with the extra labels
// below them), overridden by the instance's own labels, plus instname (and
// instid) for an instance. inst is nil for a singular metric. An info
// metric's value label is not included.
func (f *Family) Labels(inst *source.Instance) []LabelPair {
	if f.m.Lean() {
		return f.leanLabels(inst, true)
	}
	var raw []LabelPair
	raw = append(raw, f.m.extra...)
	raw = append(raw, f.labels...)
	if inst != nil {
		raw = pcpPairs(labelsFor(f.naming, inst.Labels), raw)
	}
	var s labelSet
	if f.node {
		// full labels: every PCP label, and the family's own
		for _, p := range f.m.extra {
			s.set(targetLabelName(p.Name), p.Value)
		}
		if inst != nil {
			for _, p := range pcpPairs(inst.Labels, nil) {
				s.set(p.Name, p.Value)
			}
		}
		return f.m.filter(s.sorted())
	}
	if f.naming == NamingPmproxy {
		for _, p := range raw {
			s.set(SanitizeLabelName(p.Name), p.Value)
		}
		if inst != nil {
			if !s.has("instname") {
				s.set("instname", validUTF8(inst.Name))
			}
			if !s.has("instid") {
				s.set("instid", instIDString(inst.ID))
			}
		}
	} else {
		own := []string{"instname", "instid"}
		if f.Type == Info {
			own = append(own, InfoValueLabel)
		}
		for _, p := range raw {
			n := SanitizeLabelName(p.Name)
			if reservedLabel(n, own) {
				n = "pcp_" + n
			}
			s.set(n, p.Value)
		}
		if inst != nil {
			s.set("instname", validUTF8(inst.Name))
			if f.m.cfg.InstID {
				s.set("instid", instIDString(inst.ID))
			}
		}
	}
	return f.m.filter(s.sorted())
}

// Float64 returns a numeric value converted to the family's unit, as
// libpcp converts it (Unit.Convert).
func (f *Family) Float64(v semantics.Value) float64 { return convert(v.Float64(), f.Scale) }

// PrometheusValue returns a numeric value as the Prometheus outputs give
// it (a scrape, and a backfill into TSDB blocks, remote write or
// OpenMetrics): Float64, which under the pmproxy naming is rounded to the
// number pmproxy prints (FLOAT %.8g, DOUBLE %.16g). The OpenTelemetry
// outputs take OTelValue.
func (f *Family) PrometheusValue(v semantics.Value) float64 {
	x := f.Float64(v)
	if f.naming != NamingPmproxy || math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	if t := v.Type(); t != semantics.TypeFloat && t != semantics.TypeDouble {
		return x
	}
	var buf [32]byte
	r, err := strconv.ParseFloat(string(strconv.AppendFloat(buf[:0], x, 'g', pmproxyDigits(v.Type()), 64)), 64)
	if err != nil {
		return x
	}
	return r
}

// pmproxyDigits is how many significant digits pmproxy prints a value of
// type t with: 8 for FLOAT, 16 for the others.
func pmproxyDigits(t semantics.Type) int {
	if t == semantics.TypeFloat {
		return 8
	}
	return 16
}

// AppendValue appends the text form of a numeric value in the family's unit:
// integers exactly when no scaling applies, other values as Go's shortest
// float64 form (as client_golang writes them; the pmproxy naming prints FLOAT
// with 8 and DOUBLE with 16 significant digits, as pmproxy does), NaN, +Inf,
// -Inf.
func (f *Family) AppendValue(b []byte, v semantics.Value) []byte {
	if f.integer {
		switch v.Type() {
		case semantics.Type32, semantics.Type64:
			return strconv.AppendInt(b, v.Int64(), 10)
		case semantics.TypeU32, semantics.TypeU64:
			return strconv.AppendUint(b, v.Uint64(), 10)
		}
	}
	x := f.Float64(v)
	switch {
	case math.IsNaN(x):
		return append(b, "NaN"...)
	case math.IsInf(x, 1):
		return append(b, "+Inf"...)
	case math.IsInf(x, -1):
		return append(b, "-Inf"...)
	}
	if f.naming == NamingPmproxy {
		return strconv.AppendFloat(b, x, 'g', pmproxyDigits(v.Type()), 64)
	}
	return strconv.AppendFloat(b, x, 'g', -1, 64)
}

package mmvwrite

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source/mmv/internal/layout"
)

// MetricDef describes one metric of a file to write (mmv_metric2_t).
type MetricDef struct {
	Name  string // without the mmv.<file>. prefix pmdammv adds
	Item  uint32 // < 1024
	Type  MetricType
	Sem   semantics.Sem
	Units semantics.Units
	// InDom is the serial of one of the InDoms, or 0 for a singular metric.
	InDom         uint32
	OneLine, Help string
}

// InDomDef describes one instance domain (mmv_indom2_t).
type InDomDef struct {
	Serial        uint32 // not 0
	Instances     []InstanceDef
	OneLine, Help string
}

// InstanceDef is one instance of an InDomDef.
type InstanceDef struct {
	ID   int32
	Name string
}

// LabelDef is one label of a version 3 file, as the mmv_stats_add_*_label
// functions create them.
type LabelDef struct {
	// Type is semantics.LabelCluster (the file's cluster; Identity is
	// ignored), LabelInDom (Identity = indom serial), LabelItem (Identity =
	// item) or LabelInstances (Identity = indom serial, Inst = instance).
	Type     semantics.LabelType
	Identity uint32
	Inst     int32
	Name     string
	// Value is the label's JSON value: a quoted string, a number, true,
	// false, null, an array or a map, with no whitespace.
	Value    string
	Optional bool
}

// Config is the content of a file to write.
type Config struct {
	// Cluster is the header's cluster hint (0: pmdammv chooses one).
	Cluster uint32
	Flags   Flags
	// Version forces the file version (1, 2 or 3); 0 chooses it as
	// libpcp_mmv does: 1, 2 when a metric or instance name has 64 bytes or
	// more, 3 when there are labels.
	Version int
	Metrics []MetricDef
	InDoms  []InDomDef
	Labels  []LabelDef
}

// Writer is an MMV file written the way libpcp_mmv writes it (mmv_stats_start
// and friends): byte for byte the same layout, so that pmdammv and this
// package read it. Values are updated in place through Handles.
type Writer struct {
	path    string
	data    []byte
	version int
	gen     uint64
	flags   Flags
	dev     uint64
	ino     uint64
	closed  atomic.Bool
	slots   map[slotKey]Handle
}

type slotKey struct{ metric, inst string }

// Handle is one value slot of a Writer (the pmAtomValue pointer of
// libpcp_mmv). Its setters store with atomic operations; they must not run
// after (or concurrently with) the Writer's Close.
type Handle struct {
	w    *Writer
	off  uint64 // value entry
	typ  MetricType
	soff uint64 // STRING: the string slot
}

// genNow returns libpcp_mmv's generation: seconds<<32 | microseconds.
func genNow() uint64 {
	now := time.Now()
	return uint64(now.Unix())<<32 | uint64(now.Nanosecond()/1000)
}

// resolvePath applies mmv_stats_path: a relative name lives in DefaultDir.
func resolvePath(name string) string {
	if filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(DefaultDir(), name)
}

func checkLabel(l LabelDef) ([]byte, error) {
	if l.Name == "" || !layout.IsAlpha(l.Name[0]) {
		return nil, fmt.Errorf("label name %q must start with a letter", l.Name)
	}
	for i := 1; i < len(l.Name); i++ {
		c := l.Name[i]
		if !layout.IsAlpha(c) && !(c >= '0' && c <= '9') && c != '_' {
			return nil, fmt.Errorf("label name %q: character %q not allowed", l.Name, c)
		}
	}
	if len(l.Name)+len(l.Value)+5 > LabelMax {
		return nil, fmt.Errorf("label %s: name and value longer than %d bytes", l.Name, LabelMax-5)
	}
	var c bytes.Buffer
	if !json.Valid([]byte(l.Value)) || json.Compact(&c, []byte(l.Value)) != nil || c.String() != l.Value {
		return nil, fmt.Errorf("label %s: value %q is not compact JSON", l.Name, l.Value)
	}
	switch l.Type {
	case semantics.LabelCluster, semantics.LabelInDom, semantics.LabelItem, semantics.LabelInstances:
	default:
		return nil, fmt.Errorf("label %s: type %#x is not cluster, indom, item or instances", l.Name, l.Type)
	}
	return []byte(`{"` + l.Name + `":` + l.Value + `}`), nil
}

// placement is the computed placement of every section (mmv_init).
type placement struct {
	version                                             int
	tocs                                                int
	indoms, instances, metrics, values, strings, labels uint64
	size                                                uint64
	ninst, nvalues, nstrings                            int
	instSize, metricSize                                uint64
}

func (cfg *Config) check() (int, error) {
	version := 1
	indoms := map[uint32]*InDomDef{}
	for i := range cfg.InDoms {
		in := &cfg.InDoms[i]
		if layout.Singular(in.Serial) || in.Serial > layout.MaxSerial {
			return 0, fmt.Errorf("indom serial %d: must be 1..%d", in.Serial, layout.MaxSerial)
		}
		if len(in.OneLine) >= StringMax || len(in.Help) >= StringMax {
			return 0, fmt.Errorf("indom %d: help text of %d bytes or more", in.Serial, StringMax)
		}
		for _, inst := range in.Instances {
			switch {
			case inst.Name == "":
				return 0, fmt.Errorf("indom %d: instance %d has no name", in.Serial, inst.ID)
			case len(inst.Name) >= StringMax:
				return 0, fmt.Errorf("indom %d: instance name %.20q... has %d bytes or more", in.Serial, inst.Name, StringMax)
			case len(inst.Name) >= NameMax:
				version = 2
			}
		}
		if indoms[in.Serial] == nil {
			indoms[in.Serial] = in
		}
	}
	items := map[uint32]bool{}
	names := map[string]bool{}
	for _, m := range cfg.Metrics {
		switch {
		case m.Name == "":
			return 0, errors.New("metric without a name")
		case len(m.Name) >= StringMax:
			return 0, fmt.Errorf("metric name %.20q... has %d bytes or more", m.Name, StringMax)
		case !m.Type.Valid():
			return 0, fmt.Errorf("metric %s: unsupported type %d", m.Name, m.Type)
		case m.Item > layout.MaxItem:
			return 0, fmt.Errorf("metric %s: item %d does not fit in 10 bits", m.Name, m.Item)
		case items[m.Item]:
			return 0, fmt.Errorf("metric %s: duplicate item %d", m.Name, m.Item)
		case names[m.Name]:
			return 0, fmt.Errorf("duplicate metric name %s", m.Name)
		case !layout.Singular(m.InDom) && indoms[m.InDom] == nil:
			return 0, fmt.Errorf("metric %s: no indom %d", m.Name, m.InDom)
		case len(m.OneLine) >= StringMax || len(m.Help) >= StringMax:
			return 0, fmt.Errorf("metric %s: help text of %d bytes or more", m.Name, StringMax)
		}
		if len(m.Name) >= NameMax {
			version = 2
		}
		items[m.Item], names[m.Name] = true, true
	}
	if len(cfg.Labels) > layout.MaxLabels {
		return 0, fmt.Errorf("%d labels, pmdammv reads at most %d", len(cfg.Labels), layout.MaxLabels)
	}
	if len(cfg.Labels) > 0 {
		version = 3
	}
	switch {
	case cfg.Version == 0:
	case cfg.Version < 1 || cfg.Version > 3:
		return 0, fmt.Errorf("version %d: must be 1, 2 or 3", cfg.Version)
	case cfg.Version < version:
		return 0, fmt.Errorf("version %d forced, but the content needs version %d (names of %d bytes or more, or labels)", cfg.Version, version, NameMax)
	default:
		version = cfg.Version
	}
	if int64(cfg.Cluster) > layout.MaxCluster {
		return 0, fmt.Errorf("cluster %d outside 0..%d", cfg.Cluster, layout.MaxCluster)
	}
	return version, nil
}

func (cfg *Config) indom(serial uint32) *InDomDef {
	for i := range cfg.InDoms {
		if cfg.InDoms[i].Serial == serial {
			return &cfg.InDoms[i]
		}
	}
	return nil
}

func (cfg *Config) place(version int) placement {
	l := placement{version: version, instSize: layout.Instance2Size, metricSize: layout.Metric2Size}
	if version == 1 {
		l.instSize, l.metricSize = layout.Instance1Size, layout.Metric1Size
	}
	for _, in := range cfg.InDoms {
		l.ninst += len(in.Instances)
		if version > 1 {
			l.nstrings += len(in.Instances)
		}
		l.nstrings += btoi(in.OneLine != "") + btoi(in.Help != "")
	}
	for _, m := range cfg.Metrics {
		if version > 1 {
			l.nstrings++
		}
		l.nstrings += btoi(m.OneLine != "") + btoi(m.Help != "")
		n := 1
		if !layout.Singular(m.InDom) {
			n = len(cfg.indom(m.InDom).Instances)
		}
		if m.Type == TypeString {
			l.nstrings += n
		}
		l.nvalues += n
	}
	l.tocs = 2
	if len(cfg.InDoms) > 0 {
		l.tocs += 2
	}
	if l.nstrings > 0 {
		l.tocs++
	}
	if len(cfg.Labels) > 0 {
		l.tocs++
	}
	l.indoms = layout.HeaderSize + layout.TOCSize*uint64(l.tocs)
	l.instances = l.indoms + layout.InDomSize*uint64(len(cfg.InDoms))
	l.metrics = l.instances + l.instSize*uint64(l.ninst)
	l.values = l.metrics + l.metricSize*uint64(len(cfg.Metrics))
	l.strings = l.values + layout.ValueSize*uint64(l.nvalues)
	l.labels = l.strings + layout.StringSize*uint64(l.nstrings)
	l.size = l.labels + layout.LabelSize*uint64(len(cfg.Labels))
	return l
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// New creates the MMV file at path (a relative path is taken inside
// DefaultDir, as libpcp_mmv does) with the layout libpcp_mmv gives cfg, and
// publishes it (g2 = g1) once complete. An existing file is replaced.
func New(path string, cfg Config) (*Writer, error) {
	version, err := cfg.check()
	if err != nil {
		return nil, fmt.Errorf("mmv: %s: %w", path, err)
	}
	payloads := make([][]byte, len(cfg.Labels))
	for i, l := range cfg.Labels {
		if payloads[i], err = checkLabel(l); err != nil {
			return nil, fmt.Errorf("mmv: %s: %w", path, err)
		}
	}
	path = resolvePath(path)
	l := cfg.place(version)

	_ = os.Remove(path)
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("mmv: create %s: %w", path, err)
	}
	defer unix.Close(fd)
	// libpcp_mmv sets its umask so that the file is always 0644.
	if err := unix.Fchmod(fd, 0o644); err != nil {
		return nil, fmt.Errorf("mmv: chmod %s: %w", path, err)
	}
	if err := unix.Ftruncate(fd, int64(l.size)); err != nil {
		return nil, fmt.Errorf("mmv: truncate %s: %w", path, err)
	}
	data, err := unix.Mmap(fd, 0, int(l.size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmv: mmap %s: %w", path, err)
	}
	w := &Writer{path: path, data: data, version: version, gen: genNow(), flags: cfg.Flags, slots: map[slotKey]Handle{}}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) == nil {
		w.dev, w.ino = uint64(st.Dev), uint64(st.Ino)
	}
	w.lay(&cfg, l, payloads)
	return w, nil
}

func (w *Writer) put32(off uint64, v uint32) { layout.NE.PutUint32(w.data[off:], v) }
func (w *Writer) put64(off uint64, v uint64) { layout.NE.PutUint64(w.data[off:], v) }

// putStr copies s into the n-byte field at off as strncpy does, forcing
// the last byte to NUL.
func (w *Writer) putStr(off uint64, s string, n uint64) {
	f := w.data[off : off+n]
	c := copy(f, s)
	clear(f[c:])
	f[n-1] = 0
}

// lay writes the file as mmv_init does, then publishes the generation.
func (w *Writer) lay(cfg *Config, l placement, payloads [][]byte) {
	copy(w.data, "MMV\x00")
	w.put32(4, uint32(l.version))
	w.put64(8, w.gen)
	w.put64(16, 0)
	w.put32(24, uint32(l.tocs))
	w.put32(28, uint32(cfg.Flags))
	w.put32(32, uint32(os.Getpid()))
	w.put32(36, cfg.Cluster)

	toc := uint64(layout.HeaderSize)
	addToc := func(typ, count int, off uint64) {
		w.put32(toc, uint32(typ))
		w.put32(toc+4, uint32(count))
		w.put64(toc+8, off)
		toc += layout.TOCSize
	}
	if len(cfg.InDoms) > 0 {
		addToc(layout.TOCInDoms, len(cfg.InDoms), l.indoms)
		addToc(layout.TOCInstances, l.ninst, l.instances)
	}
	addToc(layout.TOCMetrics, len(cfg.Metrics), l.metrics)
	addToc(layout.TOCValues, l.nvalues, l.values)
	if l.nstrings > 0 {
		addToc(layout.TOCStrings, l.nstrings, l.strings)
	}
	if len(cfg.Labels) > 0 {
		addToc(layout.TOCLabels, len(cfg.Labels), l.labels)
	}

	// Indoms and their instances.
	indomOff := map[uint32]uint64{} // serial -> first instance entry (first indom wins)
	inst := l.instances
	for i, in := range cfg.InDoms {
		at := l.indoms + layout.InDomSize*uint64(i)
		w.put32(at, in.Serial)
		w.put32(at+4, uint32(len(in.Instances)))
		w.put64(at+8, inst)
		if _, ok := indomOff[in.Serial]; !ok {
			indomOff[in.Serial] = inst
		}
		for _, x := range in.Instances {
			w.put64(inst, at)
			w.put32(inst+8, 0)
			w.put32(inst+12, uint32(x.ID))
			if l.version == 1 {
				w.putStr(inst+16, x.Name, NameMax)
			}
			inst += l.instSize
		}
	}

	// Metrics.
	for i, m := range cfg.Metrics {
		at := l.metrics + l.metricSize*uint64(i)
		fields := at + 8
		if l.version == 1 {
			w.putStr(at, m.Name, NameMax)
			fields = at + NameMax
		}
		w.put32(fields, m.Item)
		w.put32(fields+4, uint32(m.Type))
		w.put32(fields+8, uint32(m.Sem))
		w.put32(fields+12, m.Units.Word())
		w.put32(fields+16, m.InDom)
		w.put32(fields+20, 0)
	}

	// Values: one per metric, one per instance for an indom'd metric.
	val := l.values
	type vslot struct {
		off  uint64
		m    int
		inst string
	}
	var vals []vslot
	for i, m := range cfg.Metrics {
		mo := l.metrics + l.metricSize*uint64(i)
		if layout.Singular(m.InDom) {
			w.put64(val+16, mo)
			vals = append(vals, vslot{val, i, ""})
			val += layout.ValueSize
			continue
		}
		first := indomOff[m.InDom]
		for k, x := range cfg.indom(m.InDom).Instances {
			w.put64(val+16, mo)
			w.put64(val+24, first+l.instSize*uint64(k))
			vals = append(vals, vslot{val, i, x.Name})
			val += layout.ValueSize
		}
	}

	// Strings: v2/v3 instance names and metric names, STRING values,
	// metric help, indom help.
	str := l.strings
	newStr := func(s string) uint64 {
		off := str
		w.putStr(off, s, StringMax)
		str += layout.StringSize
		return off
	}
	if l.version > 1 {
		inst := l.instances
		for _, in := range cfg.InDoms {
			for _, x := range in.Instances {
				w.put64(inst+16, newStr(x.Name))
				inst += l.instSize
			}
		}
		for i, m := range cfg.Metrics {
			w.put64(l.metrics+l.metricSize*uint64(i), newStr(m.Name))
		}
	}
	for _, v := range vals {
		m := cfg.Metrics[v.m]
		h := Handle{w: w, off: v.off, typ: m.Type}
		if m.Type == TypeString {
			h.soff = newStr("")
			w.put64(v.off+8, h.soff)
		}
		k := slotKey{m.Name, v.inst}
		if _, dup := w.slots[k]; !dup {
			w.slots[k] = h
		}
	}
	for i, m := range cfg.Metrics {
		help := l.metrics + l.metricSize*uint64(i) + l.metricSize - 16
		if m.OneLine != "" {
			w.put64(help, newStr(m.OneLine))
		}
		if m.Help != "" {
			w.put64(help+8, newStr(m.Help))
		}
	}
	for i, in := range cfg.InDoms {
		at := l.indoms + layout.InDomSize*uint64(i)
		if in.OneLine != "" {
			w.put64(at+16, newStr(in.OneLine))
		}
		if in.Help != "" {
			w.put64(at+24, newStr(in.Help))
		}
	}

	// Labels.
	for i, lb := range cfg.Labels {
		at := l.labels + layout.LabelSize*uint64(i)
		flags := uint32(lb.Type)
		if lb.Optional {
			flags |= uint32(semantics.LabelOptional)
		}
		identity, internal := lb.Identity, int32(-1)
		switch lb.Type {
		case semantics.LabelCluster:
			identity = cfg.Cluster
		case semantics.LabelInstances:
			internal = lb.Inst
		}
		w.put32(at, flags)
		w.put32(at+4, identity)
		w.put32(at+8, uint32(internal))
		copy(w.data[at+12:at+12+LabelMax], payloads[i])
	}

	// Complete: publish the generation.
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&w.data[16])), w.gen)
}

// Path returns the file's path.
func (w *Writer) Path() string { return w.path }

// Version returns the file's MMV version.
func (w *Writer) Version() int { return w.version }

// Generation returns the file's creation time (g1).
func (w *Writer) Generation() time.Time { return layout.GenTime(w.gen) }

// Handle returns the value slot of a metric (instance "" for a singular
// metric), as mmv_lookup_value_desc.
func (w *Writer) Handle(metric, instance string) (Handle, error) {
	h, ok := w.slots[slotKey{metric, instance}]
	if !ok {
		return Handle{}, fmt.Errorf("mmv: %s: no value for metric %q instance %q", w.path, metric, instance)
	}
	return h, nil
}

// MustHandle is Handle for metrics known to exist; it panics otherwise.
func (w *Writer) MustHandle(metric, instance string) Handle {
	h, err := w.Handle(metric, instance)
	if err != nil {
		panic(err)
	}
	return h
}

// Close unmaps the file, and removes it when the PROCESS flag is set (as
// mmv_stats_stop does). Handles must not be used afterwards.
func (w *Writer) Close() error {
	if w.closed.Swap(true) {
		return nil
	}
	var err error
	if w.flags&FlagProcess != 0 {
		var st syscall.Stat_t
		if syscall.Stat(w.path, &st) == nil && uint64(st.Ino) == w.ino && uint64(st.Dev) == w.dev {
			if e := os.Remove(w.path); e != nil {
				err = fmt.Errorf("mmv: %w", e)
			}
		}
	}
	if e := unix.Munmap(w.data); e != nil && err == nil {
		err = fmt.Errorf("mmv: munmap %s: %w", w.path, e)
	}
	w.data = nil
	return err
}

func (h Handle) p64() *uint64 { return (*uint64)(unsafe.Pointer(&h.w.data[h.off])) }
func (h Handle) p32() *uint32 { return (*uint32)(unsafe.Pointer(&h.w.data[h.off])) }
func (h Handle) extra() *int64 {
	return (*int64)(unsafe.Pointer(&h.w.data[h.off+8]))
}

// SetFloat sets the value from a float64 converted to the metric's type
// as C converts (mmv_set_value); an ELAPSED value also ends any interval.
func (h Handle) SetFloat(v float64) {
	switch h.typ {
	case TypeI32:
		atomic.StoreUint32(h.p32(), uint32(int32(v)))
	case TypeU32:
		atomic.StoreUint32(h.p32(), uint32(v))
	case TypeI64:
		atomic.StoreUint64(h.p64(), uint64(int64(v)))
	case TypeU64:
		atomic.StoreUint64(h.p64(), uint64(v))
	case TypeFloat:
		atomic.StoreUint32(h.p32(), math.Float32bits(float32(v)))
	case TypeDouble:
		atomic.StoreUint64(h.p64(), math.Float64bits(v))
	case TypeElapsed:
		atomic.StoreUint64(h.p64(), uint64(int64(v)))
		atomic.StoreInt64(h.extra(), 0)
	}
}

// SetInt64 sets an integer value (truncated to 32 bits for I32/U32,
// converted for FLOAT/DOUBLE).
func (h Handle) SetInt64(v int64) {
	switch h.typ {
	case TypeI32, TypeU32:
		atomic.StoreUint32(h.p32(), uint32(v))
	case TypeI64, TypeU64:
		atomic.StoreUint64(h.p64(), uint64(v))
	case TypeElapsed:
		atomic.StoreUint64(h.p64(), uint64(v))
		atomic.StoreInt64(h.extra(), 0)
	case TypeFloat, TypeDouble:
		h.SetFloat(float64(v))
	}
}

// SetUint64 sets an unsigned integer value (see SetInt64).
func (h Handle) SetUint64(v uint64) {
	switch h.typ {
	case TypeFloat, TypeDouble:
		h.SetFloat(float64(v))
	default:
		h.SetInt64(int64(v))
	}
}

// Add adds delta to the value as mmv_inc_value does; integer additions are
// atomic. For ELAPSED a negative delta starts an interval (extra = delta)
// and a positive one ends it.
func (h Handle) Add(delta float64) {
	switch h.typ {
	case TypeI32:
		atomic.AddUint32(h.p32(), uint32(int32(delta)))
	case TypeU32:
		atomic.AddUint32(h.p32(), uint32(delta))
	case TypeI64:
		atomic.AddUint64(h.p64(), uint64(int64(delta)))
	case TypeU64:
		atomic.AddUint64(h.p64(), uint64(delta))
	case TypeFloat:
		for {
			old := atomic.LoadUint32(h.p32())
			if atomic.CompareAndSwapUint32(h.p32(), old, math.Float32bits(math.Float32frombits(old)+float32(delta))) {
				return
			}
		}
	case TypeDouble:
		for {
			old := atomic.LoadUint64(h.p64())
			if atomic.CompareAndSwapUint64(h.p64(), old, math.Float64bits(math.Float64frombits(old)+delta)) {
				return
			}
		}
	case TypeElapsed:
		if delta < 0 {
			atomic.StoreInt64(h.extra(), int64(delta))
			return
		}
		atomic.AddUint64(h.p64(), uint64(atomic.LoadInt64(h.extra())+int64(delta)))
		atomic.StoreInt64(h.extra(), 0)
	}
}

// Inc adds 1 (mmv_stats_inc).
func (h Handle) Inc() { h.Add(1) }

// SetString sets a STRING value as mmv_set_string: the slot is cleared and
// up to 254 bytes are copied; longer strings are refused.
func (h Handle) SetString(s string) error {
	if h.typ != TypeString {
		return fmt.Errorf("mmv: %s: SetString on a %s metric", h.w.path, h.typ)
	}
	if len(s) >= StringMax-1 {
		return fmt.Errorf("mmv: %s: string of %d bytes, at most %d fit", h.w.path, len(s), StringMax-2)
	}
	slot := h.w.data[h.soff : h.soff+StringMax]
	clear(slot)
	copy(slot, s)
	if i := bytes.IndexByte(slot[:len(s)], 0); i >= 0 { // strncpy stops at a NUL
		clear(slot[i:])
	}
	atomic.StoreUint32(h.p32(), uint32(len(s)))
	return nil
}

// usecNow is the microsecond clock of mmv_stats_interval_*.
func usecNow() float64 {
	now := time.Now()
	return float64(now.Unix())*1e6 + float64(now.Nanosecond()/1000)
}

// IntervalStart starts a timed interval of an ELAPSED metric
// (mmv_stats_interval_start).
func (h Handle) IntervalStart() { h.Add(-usecNow()) }

// IntervalEnd ends the interval, adding its length in microseconds
// (mmv_stats_interval_end).
func (h Handle) IntervalEnd() { h.Add(usecNow()) }

// SetSentinel stores the "no value" pattern of a SENTINEL file: all bits
// set for integer and ELAPSED types, NaN for FLOAT and DOUBLE, the empty
// string for STRING.
func (h Handle) SetSentinel() {
	switch h.typ {
	case TypeFloat:
		atomic.StoreUint32(h.p32(), math.Float32bits(float32(math.NaN())))
	case TypeDouble:
		atomic.StoreUint64(h.p64(), math.Float64bits(math.NaN()))
	case TypeString:
		_ = h.SetString("")
	default:
		atomic.StoreUint64(h.p64(), math.MaxUint64)
	}
}

// setRaw stores the raw 8-byte union and the extra field (for tests that
// reproduce a file bit for bit).
func (h Handle) setRaw(v uint64, extra int64) {
	atomic.StoreUint64(h.p64(), v)
	atomic.StoreInt64(h.extra(), extra)
}

package mmv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// valRef locates the value entry of one instance of a metric.
type valRef struct {
	off  uint32 // offset of the 32-byte value entry
	inst int32
}

// metric is one exported metric.
type metric struct {
	source.Metric
	file  *loaded
	mtype MetricType
	item  uint32
	indom uint32 // the file's indom serial (0 or ^0: singular)
	entry uint64 // offset of the metric entry
	vals  []valRef
	alias bool // same PMID as an earlier metric: values come from that one
}

// indomInfo is one instance domain of the view.
type indomInfo struct {
	id    semantics.InDom
	insts []source.Instance // sorted by ID after build
}

// rawLabel is one entry of a labels section.
type rawLabel struct {
	typ      semantics.LabelType // level bit only
	identity uint32
	internal int32
	label    semantics.Label
}

// loaded is a mapping that takes part in a view, with its assigned cluster.
type loaded struct {
	*mapping
	cluster  uint32
	metrics  []*metric
	labels   []rawLabel
	valsOff  uint64 // values section
	valsCnt  uint64
	problems []string
	nprobs   int    // problems found, logged or not
	quiet    bool   // problems already logged for this generation of the file
	skipped  string // set when no metric of the file can be exported
	budget   uint64 // bytes of entries decoding may still read (decodeBudget)
}

// view is what a set of loaded files exports: pmdammv's PMNS, descriptors,
// instance domains and labels after one map_stats.
type view struct {
	files   []*loaded
	metrics []*metric // sorted by name
	byPMID  map[semantics.PMID]*metric
	indoms  map[semantics.InDom]*indomInfo
}

// domainLabels is pmdammv's domain label set.
var domainLabels = semantics.LabelSet{{Name: "agent", Value: `"mmv"`, Flags: semantics.LabelDomain | semantics.LabelOptional}}

// maxProblems is how many problems of one file are kept in its status and
// logged one per line; the others are counted, and logged as one line.
const maxProblems = 32

func (l *loaded) problem(log *slog.Logger, format string, args ...any) {
	l.nprobs++
	if l.nprobs > maxProblems {
		return
	}
	msg := fmt.Sprintf(format, args...)
	l.problems = append(l.problems, msg)
	if log != nil && !l.quiet {
		log.Warn("mmv: skipped part of file", "file", l.path, "problem", msg)
	}
}

// problemsDone logs how many problems of the file were not logged.
func (l *loaded) problemsDone(log *slog.Logger) {
	if log != nil && !l.quiet && l.nprobs > maxProblems {
		log.Warn("mmv: skipped parts of file", "file", l.path, "problems", l.nprobs, "logged", maxProblems)
	}
}

// Decoding reads each entry of a file's sections and allocates for many of
// them, so how much it reads is bounded by how much the file holds: the
// bytes stored on disk, not the apparent size (a sparse file of 1 GiB may
// hold 4 KiB, its holes read as zeros). A file libpcp writes stores every
// page of its sections, whose entries never overlap; the budget allows
// twice its stored bytes and 64 KiB besides (filesystems that compress).
const budgetSlack = 64 << 10

func decodeBudget(m *mapping) uint64 {
	return min(uint64(len(m.data)), 2*m.disk+budgetSlack)
}

// spend takes n bytes of entries from the file's budget; false when they
// exceed it.
func (l *loaded) spend(n uint64) bool {
	if n > l.budget {
		return false
	}
	l.budget -= n
	return true
}

// validName applies pmdammv's verify_metric_name: alphabetic first
// character, then only [A-Za-z0-9_.].
func validName(name string) (byte, bool) {
	if name == "" || !isAlpha(name[0]) {
		if name == "" {
			return 0, false
		}
		return name[0], false
	}
	for i := 1; i < len(name); i++ {
		c := name[i]
		if !isAlpha(c) && !(c >= '0' && c <= '9') && c != '_' && c != '.' {
			return c, false
		}
	}
	return 0, true
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// buildView decodes the files (in pmdammv's scan order, clusters already
// assigned) into one view.
func buildView(files []*loaded, log *slog.Logger) *view {
	v := &view{
		files:  files,
		byPMID: make(map[semantics.PMID]*metric),
		indoms: make(map[semantics.InDom]*indomInfo),
	}
	names := make(map[string]bool)
	seen := make(map[semantics.InDom]map[int32]struct{})
	for _, f := range files {
		f.budget = decodeBudget(f.mapping)
		v.decodeFile(f, names, seen, log)
	}
	for _, in := range v.indoms {
		sort.SliceStable(in.insts, func(i, j int) bool { return in.insts[i].ID < in.insts[j].ID })
	}
	for _, f := range files {
		v.resolveValues(f, log)
		f.problemsDone(log)
	}
	for _, f := range files {
		v.metrics = append(v.metrics, f.metrics...)
	}
	sort.Slice(v.metrics, func(i, j int) bool { return v.metrics[i].Name < v.metrics[j].Name })
	return v
}

type toc struct {
	typ   int32
	count uint32
	off   uint64
	at    uint64 // offset of the TOC entry
}

func (v *view) decodeFile(f *loaded, names map[string]bool, indoms map[semantics.InDom]map[int32]struct{}, log *slog.Logger) {
	d := decoder(f.data)
	d.Seek(headerSize)
	var tocs [maxTOCs]toc // checkHeader bounds the count
	for i := range int(f.hdr.tocs) {
		at := uint64(d.Pos())
		tocs[i] = toc{typ: d.I32(), count: d.U32(), off: d.U64(), at: at}
	}
	if err := d.Err(); err != nil { // cannot happen: checkHeader checked the TOC size
		f.problem(log, "%v", fileErr(err, f.path))
		return
	}
	seen := map[int32]bool{}
	var metricsToc, indomsToc, labelsToc *toc
	for i := range int(f.hdr.tocs) {
		t := &tocs[i]
		var esize uint64
		var limit uint32
		switch t.typ {
		case tocMetrics:
			esize, limit = metric2Size, maxMetrics
			if f.hdr.version == 1 {
				esize = metric1Size
			}
		case tocInDoms:
			esize, limit = indomSize, maxInDoms
		case tocValues:
			esize, limit = valueSize, 1<<32-1
		case tocLabels:
			esize, limit = labelSize, maxLabels
		case tocInstances, tocStrings:
			continue // reached through the offsets in other entries
		default:
			f.problem(log, "byte offset %d: unknown TOC type %d ignored", t.at, t.typ)
			continue
		}
		if seen[t.typ] {
			f.problem(log, "byte offset %d: second TOC entry of type %d ignored", t.at, t.typ)
			continue
		}
		seen[t.typ] = true
		if t.count > limit {
			f.problem(log, "byte offset %d: section type %d has %d entries, more than pmdammv's limit %d; skipped", t.at, t.typ, t.count, limit)
			continue
		}
		if !inBounds(f.data, t.off, uint64(t.count)*esize) {
			f.problem(log, "byte offset %d: section type %d (%d entries of %d bytes at offset %d) exceeds the file size %d; skipped",
				t.at, t.typ, t.count, esize, t.off, len(f.data))
			continue
		}
		if !f.spend(uint64(t.count) * esize) {
			f.problem(log, "byte offset %d: section type %d (%d entries of %d bytes) is more than the file stores (%d bytes on disk of %d: a sparse file); skipped",
				t.at, t.typ, t.count, esize, f.disk, len(f.data))
			continue
		}
		switch t.typ {
		case tocMetrics:
			metricsToc = t
		case tocInDoms:
			indomsToc = t
		case tocLabels:
			labelsToc = t
		case tocValues:
			f.valsOff, f.valsCnt = t.off, uint64(t.count)
		}
	}
	if labelsToc != nil {
		f.decodeLabels(labelsToc, log)
	}
	if indomsToc != nil {
		v.decodeInDoms(f, indomsToc, indoms, log)
	}
	if metricsToc != nil {
		v.decodeMetrics(f, metricsToc, names, log)
	}
}

// strAt reads a string slot at off (256 bytes, NUL-terminated, at most 255
// bytes), interning it by offset.
func strAt(b []byte, off uint64, cache map[uint64]string) (string, bool) {
	if s, ok := cache[off]; ok {
		return s, true
	}
	p, ok := cstr(b, off, StringMax)
	if !ok {
		return "", false
	}
	s := string(p)
	cache[off] = s
	return s, true
}

func (f *loaded) decodeLabels(t *toc, log *slog.Logger) {
	for i := uint64(0); i < uint64(t.count); i++ {
		at := t.off + i*labelSize
		flags := ne.Uint32(f.data[at:])
		identity := ne.Uint32(f.data[at+4:])
		internal := int32(ne.Uint32(f.data[at+8:]))
		payload, _ := cstr(f.data, at+12, LabelMax)
		lt := semantics.LabelType(flags) & (semantics.LabelCluster | semantics.LabelInDom | semantics.LabelItem | semantics.LabelInstances)
		switch lt {
		case semantics.LabelCluster, semantics.LabelInDom, semantics.LabelItem, semantics.LabelInstances:
		default:
			f.problem(log, "byte offset %d: label with flags %#x has no single cluster/indom/item/instances type; ignored", at, flags)
			continue
		}
		name, value, ok := splitLabel(payload)
		if !ok {
			f.problem(log, "byte offset %d: label %q is not a {\"name\":value} JSON object; ignored", at+12, payload)
			continue
		}
		l := semantics.Label{Name: name, Value: value, Flags: lt}
		if flags&uint32(semantics.LabelOptional) != 0 {
			l.Flags |= semantics.LabelOptional
		}
		if strings.HasPrefix(value, "{") {
			l.Flags |= semantics.LabelCompound
		}
		f.labels = append(f.labels, rawLabel{typ: lt, identity: identity, internal: internal, label: l})
	}
}

// splitLabel splits a label payload {"name":value} into the name and the
// JSON text of the value.
func splitLabel(p []byte) (string, string, bool) {
	if len(p) < 6 || p[0] != '{' || p[1] != '"' || p[len(p)-1] != '}' {
		return "", "", false
	}
	end := bytes.IndexByte(p[2:], '"')
	if end <= 0 {
		return "", "", false
	}
	name := p[2 : 2+end]
	if !isAlpha(name[0]) {
		return "", "", false
	}
	for _, c := range name[1:] {
		if !isAlpha(c) && !(c >= '0' && c <= '9') && c != '_' {
			return "", "", false
		}
	}
	rest := p[2+end+1 : len(p)-1]
	if len(rest) < 2 || rest[0] != ':' || !json.Valid(rest[1:]) {
		return "", "", false
	}
	return string(name), string(rest[1:]), true
}

// decodeInDoms adds the instances of f's indoms to the view. seen holds the
// instance ids of each indom of the view so far: an indom listed many times
// (by one file or by files with the same header cluster) costs the
// instances it lists, not the instances it has.
func (v *view) decodeInDoms(f *loaded, t *toc, seen map[semantics.InDom]map[int32]struct{}, log *slog.Logger) {
	instSize := uint64(instance2Size)
	if f.hdr.version == 1 {
		instSize = instance1Size
	}
	strs := map[uint64]string{}
	for k := uint64(0); k < uint64(t.count); k++ {
		at := t.off + k*indomSize
		serial := ne.Uint32(f.data[at:])
		count := uint64(ne.Uint32(f.data[at+4:]))
		ioff := ne.Uint64(f.data[at+8:])
		if serial > maxSerial {
			f.problem(log, "byte offset %d: indom serial %d does not fit in 22 bits; ignored", at, serial)
			continue
		}
		if !inBounds(f.data, ioff, count*instSize) {
			f.problem(log, "byte offset %d: indom %d: %d instances at offset %d exceed the file size %d; ignored", at, serial, count, ioff, len(f.data))
			continue
		}
		// A hostile file could make every indom claim the same large
		// instance range: the instances read count against the budget.
		if !f.spend(count * instSize) {
			f.problem(log, "byte offset %d: indom %d: %d instances at offset %d are more than the file stores (%d bytes on disk of %d); ignored", at, serial, count, ioff, f.disk, len(f.data))
			continue
		}
		id := semantics.NewInDom(Domain, f.cluster<<11|serial)
		in := v.indoms[id]
		if in == nil {
			in = &indomInfo{id: id, insts: make([]source.Instance, 0, count)}
			v.indoms[id] = in
			seen[id] = make(map[int32]struct{}, count)
		}
		have := seen[id]
		for i := uint64(0); i < count; i++ {
			e := ioff + i*instSize
			internal := int32(ne.Uint32(f.data[e+12:]))
			var name string
			if f.hdr.version == 1 {
				p, _ := cstr(f.data, e+16, NameMax)
				name = string(p)
			} else {
				so := ne.Uint64(f.data[e+16:])
				s, ok := strAt(f.data, so, strs)
				if !ok {
					f.problem(log, "byte offset %d: instance %d of indom %d: name offset %d past end of file; ignored", e+16, internal, serial, so)
					continue
				}
				name = s
			}
			if _, ok := have[internal]; ok {
				continue
			}
			have[internal] = struct{}{}
			in.insts = append(in.insts, source.Instance{ID: internal, Name: name, Labels: f.instanceLabels(serial, internal)})
		}
	}
}

// instanceLabels returns the PM_LABEL_INSTANCES labels of one instance.
func (f *loaded) instanceLabels(serial uint32, inst int32) semantics.LabelSet {
	var s semantics.LabelSet
	for _, l := range f.labels {
		if l.typ == semantics.LabelInstances && l.internal == inst && f.indomLabelMatches(l.identity, serial) {
			s = mergeLabel(s, l.label)
		}
	}
	return s
}

// indomLabelMatches applies pmdammv's test for indom and instance labels:
// (cluster<<11 | identity) must equal the serial of the instance domain,
// which is 22 bits wide, so these labels are lost when the cluster is 2048
// or more.
func (f *loaded) indomLabelMatches(identity, serial uint32) bool {
	id := f.cluster<<11 | identity
	return id == semantics.NewInDom(Domain, f.cluster<<11|serial).Serial()
}

// mergeLabel adds l to the sorted set s, replacing a label of the same name.
func mergeLabel(s semantics.LabelSet, l semantics.Label) semantics.LabelSet {
	i, found := slices.BinarySearchFunc(s, l.Name, func(a semantics.Label, n string) int { return strings.Compare(a.Name, n) })
	if found {
		s[i] = l
		return s
	}
	return slices.Insert(s, i, l)
}

func (v *view) decodeMetrics(f *loaded, t *toc, names map[string]bool, log *slog.Logger) {
	prefix := "mmv." + f.name + "."
	if f.hdr.flags&FlagNoPrefix != 0 {
		prefix = "mmv."
	} else if c, ok := validName(prefix); !ok {
		f.skipped = fmt.Sprintf("file name %q contains %q: pmdammv rejects every metric name in it", f.name, c)
		if log != nil {
			log.Warn("mmv: file skipped", "file", f.path, "reason", f.skipped)
		}
		return
	}
	strs := map[uint64]string{}
	items := map[uint32]bool{}
	labelSets := map[[2]uint32]semantics.LabelSet{}
	for k := uint64(0); k < uint64(t.count); k++ {
		var (
			at                         uint64
			name                       string
			item, dim, indom           uint32
			typ, sem                   int32
			shortOff, helpOff, shortAt uint64
		)
		if f.hdr.version == 1 {
			at = t.off + k*metric1Size
			p, _ := cstr(f.data, at, NameMax)
			name = string(p)
			item, typ, sem = ne.Uint32(f.data[at+64:]), int32(ne.Uint32(f.data[at+68:])), int32(ne.Uint32(f.data[at+72:]))
			dim, indom = ne.Uint32(f.data[at+76:]), ne.Uint32(f.data[at+80:])
			shortAt = at + 88
		} else {
			at = t.off + k*metric2Size
			so := ne.Uint64(f.data[at:])
			s, ok := strAt(f.data, so, strs)
			if !ok {
				f.problem(log, "byte offset %d: metric %d: name offset %d past end of file; skipped", at, k, so)
				continue
			}
			name = s
			item, typ, sem = ne.Uint32(f.data[at+8:]), int32(ne.Uint32(f.data[at+12:])), int32(ne.Uint32(f.data[at+16:]))
			dim, indom = ne.Uint32(f.data[at+20:]), ne.Uint32(f.data[at+24:])
			shortAt = at + 32
		}
		shortOff, helpOff = ne.Uint64(f.data[shortAt:]), ne.Uint64(f.data[shortAt+8:])
		full := prefix + name
		if c, ok := validName(full); !ok {
			f.problem(log, "byte offset %d: metric name %q contains %q; skipped", at, full, c)
			continue
		}
		if names[full] {
			continue // pmdammv silently skips a name already in its PMNS
		}
		if item > maxItem {
			f.problem(log, "byte offset %d: metric %s: item %d does not fit in 10 bits; skipped", at, full, item)
			continue
		}
		if items[item] {
			f.problem(log, "byte offset %d: metric %s: duplicate item %d; skipped", at, full, item)
			continue
		}
		mt := MetricType(typ)
		if !mt.Valid() {
			f.problem(log, "byte offset %d: metric %s: unsupported type %d; skipped", at, full, typ)
			continue
		}
		names[full] = true
		items[item] = true
		m := &metric{file: f, mtype: mt, item: item, indom: indom, entry: at}
		m.Name = full
		m.Desc = semantics.Desc{
			PMID:  semantics.NewPMID(Domain, f.cluster, item),
			Type:  semantics.Type(mt),
			InDom: semantics.InDomNull,
			Sem:   semantics.Sem(sem),
			Units: semantics.UnitsFromWord(dim),
		}
		if sem == 0 {
			m.Desc.Sem = semantics.SemCounter
		}
		if mt == TypeElapsed {
			m.Desc.Type = semantics.Type64
			m.Desc.Sem = semantics.SemCounter
			m.Desc.Units = semantics.Units{DimTime: 1, ScaleTime: semantics.TimeUSec}
		}
		if !singular(indom) {
			m.Desc.InDom = semantics.NewInDom(Domain, f.cluster<<11|indom)
		}
		if shortOff != 0 {
			if s, ok := strAt(f.data, shortOff, strs); ok {
				m.OneLine = s
			} else {
				f.problem(log, "byte offset %d: metric %s: one-line help offset %d past end of file", shortAt, full, shortOff)
			}
		}
		if helpOff != 0 {
			if s, ok := strAt(f.data, helpOff, strs); ok {
				m.Help = s
			} else {
				f.problem(log, "byte offset %d: metric %s: help offset %d past end of file", shortAt+8, full, helpOff)
			}
		}
		if m.Help == "" {
			m.Help = m.OneLine // libpcp's pmLookupText falls back to it
		}
		m.Labels = f.metricLabels(item, indom, labelSets)
		if first := v.byPMID[m.Desc.PMID]; first != nil {
			// Duplicate header clusters: pmdammv resolves the PMID to the
			// first file; this name is an alias of that metric.
			m.alias = true
			m.Desc, m.OneLine, m.Help, m.Labels = first.Desc, first.OneLine, first.Help, first.Labels
		} else {
			v.byPMID[m.Desc.PMID] = m
		}
		f.metrics = append(f.metrics, m)
	}
}

func singular(indom uint32) bool { return indom == 0 || indom == 0xffffffff }

// metricLabels merges domain < indom < cluster < item labels of a metric,
// sharing sets between metrics that get the same labels.
func (f *loaded) metricLabels(item, indom uint32, memo map[[2]uint32]semantics.LabelSet) semantics.LabelSet {
	hasItem := false
	for _, l := range f.labels {
		if l.typ == semantics.LabelItem && l.identity == item {
			hasItem = true
			break
		}
	}
	key := [2]uint32{indom, 0xffffffff}
	if hasItem {
		key[1] = item
	}
	if s, ok := memo[key]; ok {
		return s
	}
	s := slices.Clone(domainLabels)
	for _, typ := range []semantics.LabelType{semantics.LabelInDom, semantics.LabelCluster, semantics.LabelItem} {
		for _, l := range f.labels {
			if l.typ != typ {
				continue
			}
			switch typ {
			case semantics.LabelInDom:
				if singular(indom) || !f.indomLabelMatches(l.identity, indom) {
					continue
				}
			case semantics.LabelCluster:
				if l.identity != f.cluster {
					continue
				}
			case semantics.LabelItem:
				if l.identity != item {
					continue
				}
			}
			s = mergeLabel(s, l.label)
		}
	}
	memo[key] = s
	return s
}

// resolveValues finds, for every metric of f, the value entry of each
// instance: the first entry that points at the metric and (for an indom'd
// metric) at an instance whose internal id matches, as pmdammv's lookup.
func (v *view) resolveValues(f *loaded, log *slog.Logger) {
	if f.valsCnt == 0 || len(f.metrics) == 0 {
		return
	}
	byEntry := make(map[uint64]*metric, len(f.metrics))
	for _, m := range f.metrics {
		if !m.alias {
			byEntry[m.entry] = m
		}
	}
	type key struct {
		m    *metric
		inst int32
	}
	first := make(map[key]bool)
	for i := uint64(0); i < f.valsCnt; i++ {
		at := f.valsOff + i*valueSize
		m := byEntry[ne.Uint64(f.data[at+16:])]
		if m == nil {
			continue
		}
		inst := semantics.InNull
		if !singular(m.indom) {
			io := ne.Uint64(f.data[at+24:])
			if !inBounds(f.data, io, 16) {
				f.problem(log, "byte offset %d: value of %s: instance offset %d past end of file; ignored", at+24, m.Name, io)
				continue
			}
			inst = int32(ne.Uint32(f.data[io+12:]))
			in := v.indoms[m.Desc.InDom]
			if in == nil {
				continue
			}
			if _, ok := slices.BinarySearchFunc(in.insts, inst, func(a source.Instance, id int32) int { return int(int64(a.ID) - int64(id)) }); !ok {
				continue
			}
		} else if len(m.vals) > 0 {
			continue
		}
		k := key{m, inst}
		if first[k] {
			continue
		}
		first[k] = true
		m.vals = append(m.vals, valRef{off: uint32(at), inst: inst})
	}
	for _, m := range f.metrics {
		if !sort.SliceIsSorted(m.vals, func(i, j int) bool { return m.vals[i].inst < m.vals[j].inst }) {
			sort.SliceStable(m.vals, func(i, j int) bool { return m.vals[i].inst < m.vals[j].inst })
		}
	}
}

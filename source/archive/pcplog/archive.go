package pcplog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// Archive is an open PCP archive. Its metadata accessors are safe for
// concurrent use, also while Refresh runs; each Reader is for one goroutine.
type Archive struct {
	base      string
	label     Label
	metaPath  string
	indexPath string
	st        atomic.Pointer[state]
	mu        sync.Mutex // serializes Refresh
	// metaErr is Refresh's error parsing the .meta file when it had
	// metaErrSize bytes: given again until the file changes size
	metaErr     error
	metaErrSize int64

	// the last record End found, where the next End resumes (an archive
	// being written grows at its end)
	endMu  sync.Mutex
	endPos IndexEntry

	openVolume func(path string) (*stream, error) // openStream; replaced by fuzz tests

	// live: pmlogger is still writing the archive (OpenLive), so a partial
	// last record of the .meta or of a volume is not yet written; in a
	// finished archive it is cut short: an error for the .meta, a report
	// for a volume (see Truncated)
	live bool
	cut  atomic.Pointer[FormatError]
}

// state is an immutable snapshot of what is known of the archive.
type state struct {
	meta     *meta
	vols     []volumeFile
	index    []IndexEntry
	indexOff int64

	once    sync.Once
	metrics []source.Metric
}

func (a *Archive) state() *state { return a.st.Load() }

// Open opens the finished archive named by path: its base name, or the name
// of any of its files (.meta, .index, .N, each possibly with a compression
// suffix). The .meta file is loaded fully; volumes are read incrementally by
// Readers. A .meta file whose last record is cut short is an error (libpcp's
// "Corrupted record"); a volume's is reported by Truncated.
func Open(path string) (*Archive, error) {
	return open(path, false)
}

// OpenLive opens an archive that pmlogger is still writing: the partial
// last record of its .meta file or of its last volume is not yet written,
// not an error (Refresh reads it once it is whole).
func OpenLive(path string) (*Archive, error) {
	return open(path, true)
}

func open(path string, live bool) (*Archive, error) {
	base := BaseName(path)
	if _, err := findFile(path + ".meta"); err == nil {
		base = path // a base name that ends in ".N", as pmlogger's 20240101.00.10
	}
	a := &Archive{base: base, openVolume: openStream, live: live}
	mp, err := findFile(base + ".meta")
	if err != nil {
		if _, e2 := os.Stat(path); e2 != nil && errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s: no such archive: %w", path, err)
		}
		return nil, fmt.Errorf("%s: missing .meta file: %w", base, err)
	}
	a.metaPath = mp
	l, m, err := readMeta(mp, live)
	if err != nil {
		return nil, err
	}
	a.label = l
	st := &state{meta: m}
	if ip, err := findFile(base + ".index"); err == nil {
		a.indexPath = ip
		ib, err := readAll(ip)
		if err != nil {
			return nil, err
		}
		il, err := ParseLabel(ip, ib)
		if err != nil {
			return nil, err
		}
		if err := a.checkLabel(ip, il, VolIndex); err != nil {
			return nil, err
		}
		lsz := LabelSize(l.Version)
		var n int
		st.index, n = ParseIndex(ib[lsz:], l.Version)
		st.indexOff = int64(lsz + n)
	}
	st.vols, err = findVolumes(base)
	if err != nil {
		return nil, err
	}
	if len(st.vols) == 0 {
		return nil, fmt.Errorf("%s: archive has no data volume", base)
	}
	a.st.Store(st)
	// check the first volume's label now, so a bad archive fails at Open
	r := a.Records()
	defer r.Close()
	if err := r.open(st.vols[0]); err != nil {
		return nil, err
	}
	return a, nil
}

// readMeta reads the label and the records of a .meta file. A cut last
// record is an error unless the file may still be written (live).
func readMeta(mp string, live bool) (Label, *meta, error) {
	var l Label
	var m *meta
	if compressionOf(mp) != "" {
		var err error
		if l, m, err = readCompressedMeta(mp); err != nil {
			return Label{}, nil, err
		}
	} else {
		b, err := readAll(mp)
		if err != nil {
			return Label{}, nil, err
		}
		if l, err = ParseLabel(mp, b); err != nil {
			return Label{}, nil, err
		}
		if err := checkMetaLabel(mp, l); err != nil {
			return Label{}, nil, err
		}
		m = newMeta()
		m.off = int64(LabelSize(l.Version))
		used, err := m.parse(mp, b[m.off:])
		if err != nil {
			return Label{}, nil, err
		}
		m.off += int64(used)
		if left := int64(len(b)) - m.off; left > 0 && !live {
			return Label{}, nil, &FormatError{File: mp, Off: m.off, Msg: cutMsg("metadata", b[m.off:])}
		}
		m.notePending(b[m.off:])
	}
	return l, m, nil
}

func checkMetaLabel(mp string, l Label) error {
	if l.Vol != VolMeta {
		return &FormatError{File: mp, Off: 20, Msg: fmt.Sprintf("label volume %d, want -1 for .meta", l.Vol)}
	}
	return nil
}

// checkLabel verifies a file's label against the archive's (__pmLogChkLabel).
func (a *Archive) checkLabel(file string, l Label, vol int32) error {
	switch {
	case l.Version != a.label.Version:
		return &FormatError{File: file, Off: 4, Msg: fmt.Sprintf("archive version %d, but the .meta file has %d", l.Version, a.label.Version)}
	case l.Vol != vol:
		return &FormatError{File: file, Off: 20, Msg: fmt.Sprintf("label volume %d, want %d", l.Vol, vol)}
	case l.PID != a.label.PID || l.Hostname != a.label.Hostname:
		return &FormatError{File: file, Off: 8, Msg: fmt.Sprintf("label (pid %d, host %q) does not match the .meta label (pid %d, host %q)", l.PID, l.Hostname, a.label.PID, a.label.Hostname)}
	}
	return nil
}

// cutMsg describes the partial record rec (what is left of the file).
func cutMsg(what string, rec []byte) string {
	if len(rec) < 4 {
		return fmt.Sprintf("%s record cut short (%d bytes of its length)", what, len(rec))
	}
	return fmt.Sprintf("%s record cut short (%d of its %d bytes)", what, len(rec), int32(be32(rec)))
}

// Truncated returns the error of a record cut short at the end of a volume
// of a finished archive (opened with Open), or of zeros where a record
// should start (in any archive: a crashed pmlogger's zero-filled tail), the
// first one a Reader met: Readers end there as at the end of the data, as
// libpcp reports PM_ERR_LOGREC after the records before it. nil when none
// was met.
func (a *Archive) Truncated() error {
	if e := a.cut.Load(); e != nil {
		return e
	}
	return nil
}

// Close releases the archive. Readers hold their own files; close them too.
func (a *Archive) Close() error { return nil }

// Label returns the label of the archive (from its .meta file).
func (a *Archive) Label() Label { return a.label }

// Path returns the base name of the archive.
func (a *Archive) Path() string { return a.base }

// Index returns the temporal index entries (nil without a .index file).
func (a *Archive) Index() []IndexEntry { return a.state().index }

// Volumes returns the volume numbers found, in order.
func (a *Archive) Volumes() []int {
	vs := a.state().vols
	out := make([]int, len(vs))
	for i, v := range vs {
		out[i] = v.num
	}
	return out
}

// Plain reports whether volume number vol was found as a plain
// (uncompressed) file.
func (a *Archive) Plain(vol int) bool {
	for _, v := range a.state().vols {
		if v.num == vol {
			return compressionOf(v.path) == ""
		}
	}
	return false
}

// LastVolumePath returns the path of the last volume found.
func (a *Archive) LastVolumePath() string {
	vols := a.state().vols
	return vols[len(vols)-1].path
}

// Records returns a Reader over all records of all volumes, in order.
func (a *Archive) Records() *Reader {
	v := a.label.Version
	h := 16
	if v == 3 {
		h = 20
	}
	return &Reader{a: a, version: v, hdrSize: h}
}

// RecordsFrom returns a Reader positioned with the temporal index at the last
// index entry before t (the start of the archive without one). Every record
// at or after t follows, and its first records may lie before t, so a caller
// needing the observation before t (the prior value) finds it there.
func (a *Archive) RecordsFrom(t time.Time) *Reader {
	r := a.Records()
	st := a.state()
	i := sort.Search(len(st.index), func(i int) bool { return !st.index[i].Time.Before(t) }) - 1
	for ; i >= 0; i-- {
		if a.seek(r, st, st.index[i]) {
			break
		}
	}
	return r
}

// Seek positions r, a Reader of a that has not started, at index entry e
// (see RecordsFrom); false if the entry is unusable: no such volume, or no
// whole record at its offset.
func (a *Archive) Seek(r *Reader, e IndexEntry) bool { return a.seek(r, a.state(), e) }

// seek positions a new Reader at an index entry; false if the entry is unusable.
func (a *Archive) seek(r *Reader, st *state, e IndexEntry) bool {
	if e.DataOff < int64(LabelSize(a.label.Version)) {
		return false
	}
	for vi, v := range st.vols {
		if int32(v.num) == e.Vol {
			if !recordAt(v.path, e.DataOff) {
				return false
			}
			r.vi = vi
			r.start = e.DataOff
			return true
		}
	}
	return false
}

// Refresh re-reads what a writer appended since Open or the last Refresh:
// new .meta records, index entries and volumes. Readers see new records of
// the last volume and new volumes on their next call to Next.
func (a *Archive) Refresh() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	old := a.state()
	st := &state{meta: old.meta, vols: old.vols, index: old.index, indexOff: old.indexOff}
	if compressionOf(a.metaPath) == "" {
		if fi, err := os.Stat(a.metaPath); err == nil && a.metaErr != nil && fi.Size() == a.metaErrSize {
			return a.metaErr // not read again before the file changes
		}
		b, size, err := metaTail(a.metaPath, old.meta)
		if err != nil {
			return err
		}
		if len(b) >= 4 {
			m := old.meta.clone()
			used, err := m.parse(a.metaPath, b)
			if err != nil {
				a.metaErr, a.metaErrSize = err, size
				return err
			}
			m.off += int64(used)
			m.notePending(b[used:])
			st.meta = m
		}
		a.metaErr = nil
	}
	if a.indexPath == "" {
		if ip, err := findFile(a.base + ".index"); err == nil && compressionOf(ip) == "" {
			a.indexPath = ip
			st.indexOff = int64(LabelSize(a.label.Version))
		}
	}
	if a.indexPath != "" && compressionOf(a.indexPath) == "" {
		b, err := readFrom(a.indexPath, st.indexOff)
		if err != nil {
			return err
		}
		es, n := ParseIndex(b, a.label.Version)
		if len(es) > 0 {
			st.index = append(old.index[:len(old.index):len(old.index)], es...)
			st.indexOff += int64(n)
		}
	}
	vols, err := findVolumes(a.base)
	if err != nil {
		return err
	}
	// keep the order of known volumes, so Readers' positions stay valid
	known := map[int]bool{}
	for _, v := range old.vols {
		known[v.num] = true
	}
	for _, v := range vols {
		if !known[v.num] && v.num > old.vols[len(old.vols)-1].num {
			st.vols = append(st.vols[:len(st.vols):len(st.vols)], v)
		}
	}
	a.st.Store(st)
	return nil
}

func readFrom(path string, off int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}

// metaTail returns what follows the part of a plain .meta file m holds,
// and the file's size; nothing before the file holds the record m is
// waiting for (a scrape does not read a growing tail again and again).
func metaTail(path string, m *meta) ([]byte, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	size := fi.Size()
	if size < m.off+max(4, m.pending) {
		return nil, size, nil
	}
	b, err := io.ReadAll(io.NewSectionReader(f, m.off, size-m.off))
	if err != nil {
		return nil, size, fmt.Errorf("%s: %w", path, err)
	}
	return b, size, nil
}

// Desc returns the descriptor of a PMID.
func (a *Archive) Desc(p semantics.PMID) (semantics.Desc, bool) {
	mi := a.state().meta.descs[p]
	if mi == nil {
		return semantics.Desc{}, false
	}
	return mi.desc, true
}

// Lookup returns the PMID of a metric name.
func (a *Archive) Lookup(name string) (semantics.PMID, bool) {
	p, ok := a.state().meta.names[name]
	return p, ok
}

// Names returns the names of a PMID, first the one PCP tools report.
func (a *Archive) Names(p semantics.PMID) []string {
	mi := a.state().meta.descs[p]
	if mi == nil {
		return nil
	}
	return mi.names
}

// Name returns the first name of a PMID, or its dotted form when unknown.
func (a *Archive) Name(p semantics.PMID) string {
	if n := a.Names(p); len(n) > 0 {
		return n[0]
	}
	return p.String()
}

// OneLine returns the one-line help text of a PMID ("" if none).
func (a *Archive) OneLine(p semantics.PMID) string {
	return a.state().meta.texts[textKey{textOneLine | textPMID, uint32(p)}]
}

// Help returns the long help text of a PMID, or its one-line text where
// the archive has no (or an empty) long text, as libpcp's pmLookupText
// answers ("" if neither).
func (a *Archive) Help(p semantics.PMID) string {
	return a.state().meta.help(textPMID, uint32(p))
}

// InDomOneLine returns the one-line help text of an instance domain.
func (a *Archive) InDomOneLine(i semantics.InDom) string {
	return a.state().meta.texts[textKey{textOneLine | textInDom, uint32(i)}]
}

// InDomHelp returns the long help text of an instance domain, or its
// one-line text without one (as Help).
func (a *Archive) InDomHelp(i semantics.InDom) string {
	return a.state().meta.help(textInDom, uint32(i))
}

// Labels returns the label set of one level of the hierarchy in force at
// the end of the archive: typ is LabelContext (ident ignored), LabelDomain
// (ident = domain), LabelInDom (indom), LabelCluster (pmID_build(domain,
// cluster, 0)) or LabelItem (pmid). Without context labels in the archive,
// the context labels are {"hostname": <label hostname>} as libpcp makes them.
func (a *Archive) Labels(typ semantics.LabelType, ident uint32) semantics.LabelSet {
	m := a.state().meta
	if typ == semantics.LabelContext {
		return a.contextLabels(m)
	}
	return m.firstSet(typ, ident)
}

func (a *Archive) contextLabels(m *meta) semantics.LabelSet {
	recs := m.labels[labelKey{semantics.LabelContext, uint32(semantics.InDomNull)}]
	if len(recs) == 0 {
		for k, r := range m.labels {
			if k.typ == semantics.LabelContext {
				recs = r
				break
			}
		}
	}
	if len(recs) > 0 && len(recs[len(recs)-1].sets) > 0 {
		return recs[len(recs)-1].sets[0].labels
	}
	if a.label.Hostname == "" {
		return nil
	}
	return semantics.LabelSet{{Name: "hostname", Value: string(semantics.AppendJSONString(nil, a.label.Hostname)), Flags: semantics.LabelContext}}
}

// MetricLabels returns the merged labels of a metric (context < domain <
// indom < cluster < item).
func (a *Archive) MetricLabels(d semantics.Desc) semantics.LabelSet {
	m := a.state().meta
	return a.metricLabels(m, d, nil)
}

// upperLabels identifies the levels of a metric's labels above its item
// (context, domain, indom, cluster), which metrics share: the cluster is a
// PMID with item 0, so it holds the domain.
type upperLabels struct {
	indom   semantics.InDom
	cluster semantics.PMID
}

// metricLabels merges a metric's labels. memo (when not nil) keeps the
// merged upper levels by upperLabels: most metrics of an archive share
// them with others, and most have no item labels. Such sets are shared
// between metrics, read-only; every set returned has its length as its
// capacity, so that appending to one copies it.
func (a *Archive) metricLabels(m *meta, d semantics.Desc, memo map[upperLabels]semantics.LabelSet) semantics.LabelSet {
	cluster := semantics.NewPMID(d.PMID.Domain(), d.PMID.Cluster(), 0)
	k := upperLabels{d.InDom, cluster}
	upper, ok := memo[k]
	if !ok {
		sets := []semantics.LabelSet{
			a.contextLabels(m),
			m.firstSet(semantics.LabelDomain, d.PMID.Domain()),
		}
		if d.InDom != semantics.InDomNull {
			sets = append(sets, m.firstSet(semantics.LabelInDom, uint32(d.InDom)))
		}
		sets = append(sets, m.firstSet(semantics.LabelCluster, uint32(cluster)))
		upper = semantics.MergeLabels(sets...)
		upper = upper[:len(upper):len(upper)]
		if memo != nil {
			memo[k] = upper
		}
	}
	// a later set wins label by label, so merging the upper levels
	// first and the item's over them is merging all five in order
	if item := m.firstSet(semantics.LabelItem, uint32(d.PMID)); len(item) > 0 {
		s := semantics.MergeLabels(upper, item)
		return s[:len(s):len(s)]
	}
	return upper
}

// InstanceLabels returns the instance labels (PM_LABEL_INSTANCES) of an
// instance domain in force at the end, by instance id. Writers may put the
// instances of one indom in separate records: for each instance the newest
// set wins.
func (a *Archive) InstanceLabels(indom semantics.InDom) map[int32]semantics.LabelSet {
	ls, _ := a.instanceLabelsAt(a.state().meta, indom, maxTime)
	return ls
}

// maxTime is a time after every record.
var maxTime = time.Unix(1<<62, 0)

// instanceLabelsAt returns the instance labels of an instance domain in
// force at t (for each instance, its newest set at or before t; before the
// first record, the first record's sets) and the time of the next record
// after t (zero: none).
func (a *Archive) instanceLabelsAt(m *meta, indom semantics.InDom, t time.Time) (map[int32]semantics.LabelSet, time.Time) {
	recs := m.labels[labelKey{semantics.LabelInstances, uint32(indom)}]
	if len(recs) == 0 {
		return nil, time.Time{}
	}
	n := sort.Search(len(recs), func(i int) bool { return recs[i].t.After(t) })
	var until time.Time
	if n < len(recs) {
		until = recs[n].t
	}
	if n == 0 {
		n = 1
	}
	out := map[int32]semantics.LabelSet{}
	for _, r := range recs[:n] {
		for _, s := range r.sets {
			out[int32(s.inst)] = s.labels
		}
	}
	return out, until
}

// Metrics returns the metadata of every metric, one entry per name, in name
// order, with merged labels.
func (a *Archive) Metrics() []source.Metric {
	st := a.state()
	st.once.Do(func() {
		m := st.meta
		names := make([]string, 0, len(m.names))
		for n := range m.names {
			names = append(names, n)
		}
		sort.Strings(names)
		out := make([]source.Metric, 0, len(names))
		memo := map[upperLabels]semantics.LabelSet{}
		for _, n := range names {
			p := m.names[n]
			d := m.descs[p].desc
			out = append(out, source.Metric{
				Name:    n,
				Desc:    d,
				OneLine: m.texts[textKey{textOneLine | textPMID, uint32(p)}],
				Help:    m.help(textPMID, uint32(p)),
				Labels:  a.metricLabels(m, d, memo),
			})
		}
		st.metrics = out
	})
	return st.metrics
}

// Instances returns every instance the archive ever lists for the instance
// domain (the union over all its records, as pmGetInDomArchive), by id, each
// with its name and instance labels in force at the end of the archive (an
// id that changed its name has its newest).
func (a *Archive) Instances(indom semantics.InDom) []source.Instance {
	ins, _ := a.InstancesInForce(indom, maxTime)
	return ins
}

// InstancesInForce returns every instance the archive lists for the domain
// (as Instances), each with the name and instance labels in force at t:
// those of the newest record at or before t that lists the instance (libpcp's
// pmGetInDom after pmSetMode to t), else of the first record that lists it
// after t. until is the time of the next metadata record that may change
// the answer (zero: none). It implements source.InDomHistory.
func (a *Archive) InstancesInForce(indom semantics.InDom, t time.Time) (insts []source.Instance, until time.Time) {
	m := a.state().meta
	insts, until = a.namedAt(m, indom, t)
	ls, lu := a.instanceLabelsAt(m, indom, t)
	if !lu.IsZero() && (until.IsZero() || lu.Before(until)) {
		until = lu
	}
	if ls != nil {
		for i := range insts {
			insts[i].Labels = ls[insts[i].ID]
		}
	}
	return insts, until
}

// InstanceIDs returns the ids of Instances(indom) (no names or labels
// made).
func (a *Archive) InstanceIDs(indom semantics.InDom) []int32 {
	ins := a.instancesAll(indom)
	out := make([]int32, len(ins))
	for i, in := range ins {
		out[i] = in.ID
	}
	return out
}

// instancesAll is Instances without labels.
func (a *Archive) instancesAll(indom semantics.InDom) []source.Instance {
	ins, _ := a.namedAt(a.state().meta, indom, maxTime)
	return ins
}

// InDomArchiveOrder returns the ids of Instances in the order of libpcp's
// pmGetInDomArchive: the newest record first, each record's instances in
// its order (id order here), every id once. An id comes with the last
// record in which it is present.
func (a *Archive) InDomArchiveOrder(indom semantics.InDom) []int32 {
	m := a.state().meta
	last := map[int32]int{} // id -> index of the last record it is in
	cur := m.walkInDom(indom, func(k int, in source.Instance, gone bool) {
		if gone {
			last[in.ID] = k - 1
		}
	})
	n := len(m.indoms[indom])
	for id := range cur {
		last[id] = n - 1
	}
	out := make([]int32, 0, len(last))
	for id := range last {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool {
		if last[out[i]] != last[out[j]] {
			return last[out[i]] > last[out[j]]
		}
		return out[i] < out[j]
	})
	return out
}

// namedAt is InstancesInForce without labels: every instance the domain
// ever had, named as in the newest record at or before t that lists it
// (else the first later one), and the time of the first record after t.
func (a *Archive) namedAt(m *meta, indom semantics.InDom, t time.Time) ([]source.Instance, time.Time) {
	snaps := m.indoms[indom]
	var until time.Time
	at := map[int32]int{} // index in out
	var out []source.Instance
	m.walkInDom(indom, func(k int, in source.Instance, gone bool) {
		if gone {
			return
		}
		later := snaps[k].t.After(t)
		i, seen := at[in.ID]
		switch {
		case !seen:
			at[in.ID] = len(out)
			out = append(out, in)
		case !later:
			out[i].Name = in.Name // a newer record in force at t
		}
	})
	for _, s := range snaps {
		if s.t.After(t) {
			until = s.t
			break
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, until
}

// instancesAt is InstancesAt without labels, shared: not to be changed.
func (a *Archive) instancesAt(indom semantics.InDom, t time.Time) []source.Instance {
	m := a.state().meta
	snaps := m.indoms[indom]
	i := sort.Search(len(snaps), func(i int) bool { return snaps[i].t.After(t) }) - 1
	if i < 0 {
		return nil
	}
	return m.materialize(snaps[i].node)
}

// InstancesAt returns the instance domain in force at t: the newest indom
// record at or before t, deltas applied; nil if there is none.
func (a *Archive) InstancesAt(indom semantics.InDom, t time.Time) []source.Instance {
	ins := a.instancesAt(indom, t)
	if ins == nil {
		return nil
	}
	return a.withLabels(indom, append([]source.Instance(nil), ins...), t)
}

// InDomChanges returns the times at which the instance domain's metadata
// records take effect, in order.
func (a *Archive) InDomChanges(indom semantics.InDom) []time.Time {
	snaps := a.state().meta.indoms[indom]
	out := make([]time.Time, len(snaps))
	for i, s := range snaps {
		out[i] = s.t
	}
	return out
}

func (a *Archive) withLabels(indom semantics.InDom, insts []source.Instance, t time.Time) []source.Instance {
	il, _ := a.instanceLabelsAt(a.state().meta, indom, t)
	if il == nil {
		return insts
	}
	for i := range insts {
		insts[i].Labels = il[insts[i].ID]
	}
	return insts
}

// End returns the time of the last record of the archive (pmGetArchiveEnd):
// it scans forward from the last temporal index entry that is followed by a
// record (the last entry usually points at the end of the data), or from the
// start without an index. A truncated last record is not counted.
//
// A later call resumes at the last record the previous one found (when it
// is still the last known volume's or an earlier one's), so following an
// archive that grows reads each record's framing once.
func (a *Archive) End() (time.Time, error) {
	a.endMu.Lock()
	defer a.endMu.Unlock()
	st := a.state()
	entries := st.index
	if a.endPos.DataOff > 0 && !a.endPos.Time.Before(lastTime(st.index)) {
		entries = []IndexEntry{a.endPos}
	}
	for i := len(entries) - 1; i >= -1; i-- {
		r := a.Records()
		if i >= 0 {
			if !a.seek(r, st, entries[i]) {
				if len(entries) == 1 && len(st.index) > 0 && entries[0] == a.endPos {
					entries = st.index // the resume point is gone: the index then
					i = len(entries)
				}
				continue
			}
		}
		r.Only(func(semantics.PMID) bool { return false })
		var end time.Time
		var at IndexEntry
		found := false
		for r.Next() {
			found = true
			rec := r.Record()
			if rec.Time.After(end) {
				end = rec.Time
			}
			at = IndexEntry{Time: rec.Time, Vol: int32(rec.Vol), DataOff: rec.Off}
		}
		err := r.Err()
		r.Close()
		if err != nil {
			return end, err
		}
		if found {
			a.endPos = at
			if at.Time.Before(end) {
				a.endPos.Time = end
			}
			return end, nil
		}
	}
	return a.label.Start, nil
}

// lastTime is the time of the last index entry (zero without one).
func lastTime(index []IndexEntry) time.Time {
	if len(index) == 0 {
		return time.Time{}
	}
	return index[len(index)-1].Time
}

// recordAt reports whether a plain volume holds a whole record at off (its
// length and trailer agree) or ends at off, so that a corrupt index entry (past the end,
// inside a record) is passed over for an earlier one instead of ending the
// iteration. Compressed volumes cannot be checked without decompressing and
// are trusted.
func recordAt(path string, off int64) bool {
	if compressionOf(path) != "" {
		return true
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() == off {
		return true // pmlogger's closing entry: the end of the volume
	}
	var b [4]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		return false
	}
	n := int64(int32(be32(b[:])))
	if n < 16 || n > MaxRecordSize-1 {
		return false
	}
	if _, err := f.ReadAt(b[:], off+n-4); err != nil {
		return false
	}
	return int64(int32(be32(b[:]))) == n
}

package mmv

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// Options control how MMV files are read.
type Options struct {
	// PIDCheck honours the PROCESS flag as pmdammv does: a file whose
	// writer's PID does not exist is not exported. Turn it off when the
	// writer lives in another PID namespace (a sidecar container).
	PIDCheck bool
	// Logger receives the reasons files or parts of files are skipped; nil
	// discards them.
	Logger *slog.Logger
}

func (o Options) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
}

// FileStatus describes one file of a directory (or the single file of a
// File) as last loaded: for self-metrics and diagnostics.
type FileStatus struct {
	Name string
	Path string
	// Exported is true when the file's metrics are exported.
	Exported bool
	// Reason says why the file is not exported ("" when it is).
	Reason     string
	Version    int
	Flags      Flags
	PID        int32
	Cluster    uint32 // the cluster pmdammv would use (assigned when the header has 0)
	Generation time.Time
	Metrics    int // metrics exported from the file
	// Problems lists parts of the file that were skipped (bad sections,
	// names pmdammv rejects, offsets past the end), at most 32.
	Problems []string
}

func (l *loaded) status() FileStatus {
	s := FileStatus{
		Name: l.name, Path: l.path, Exported: l.skipped == "", Reason: l.skipped,
		Version: int(l.hdr.version), Flags: l.hdr.flags, PID: l.hdr.process, Cluster: l.cluster,
		Generation: genTime(l.gen), Metrics: len(l.metrics), Problems: l.problems,
	}
	return s
}

// ----------------------------------------------------------------------------
// File

// File is one MMV file, exported as pmdammv would export it if it were
// alone in its directory (cluster 1 when its header says 0). It follows the
// file: a new generation, a replaced file or a writer that exits (PROCESS)
// is noticed at the next call.
type File struct {
	path string
	opts Options

	mu    sync.Mutex
	l     *loaded
	v     *view
	err   error  // why the file is not exported now
	epoch uint64 // incremented whenever the file is (un)loaded
}

var _ source.Source = (*File)(nil)

// OpenFile opens one MMV file. It fails when the file cannot be read or is
// not an exportable MMV file (bad header, writer still in flux after a short
// wait, writer process gone with PIDCheck).
func OpenFile(path string, opts Options) (*File, error) {
	f := &File{path: path, opts: opts}
	if err := f.load(); err != nil {
		return nil, err
	}
	return f, nil
}

// fluxRetries is how many times (2 ms apart) a File retries a file whose
// writer has not finished it.
var fluxRetries = 50

// load (re)maps the file, retrying briefly while its writer is in flux.
func (f *File) load() error {
	f.unload(nil)
	var m *mapping
	var err error
	for i := 0; ; i++ {
		m, err = mapFile(f.path, filepath.Base(f.path), f.opts.PIDCheck)
		if !errors.Is(err, ErrInFlux) || i >= fluxRetries {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err != nil {
		f.err = err
		return err
	}
	cluster := uint32(1)
	if c := m.hdr.cluster; c != 0 {
		if c < 0 || c > maxCluster {
			m.unmap()
			f.err = &FormatError{File: f.path, Off: 36, Msg: fmt.Sprintf("cluster %d outside 0..%d", c, maxCluster)}
			return f.err
		}
		cluster = uint32(c)
	}
	f.l = &loaded{mapping: m, cluster: cluster}
	f.v = buildView([]*loaded{f.l}, f.opts.Logger)
	f.epoch++
	return nil
}

// Epoch numbers the file's metric set (source.Epoched): it changes
// whenever the file is loaded again or stops being exported.
func (f *File) Epoch() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.epoch
}

func (f *File) unload(err error) {
	f.epoch++
	if f.l != nil {
		f.l.unmap()
	}
	f.l, f.v, f.err = nil, nil, err
}

// refresh notices a replaced file, a new generation or a vanished writer;
// a file cut short under its mapping stops being exported (until a later
// refresh maps it again).
func (f *File) refresh() {
	if err := guard(f.mappings, f.path, f.refreshMapped); err != nil {
		f.unload(err)
	}
}

func (f *File) mappings() []*mapping {
	if f.l == nil {
		return nil
	}
	return []*mapping{f.l.mapping}
}

func (f *File) refreshMapped() {
	if f.l == nil {
		_ = f.load()
		return
	}
	var st unix.Stat_t
	if err := unix.Stat(f.path, &st); err != nil {
		f.unload(&os.PathError{Op: "stat", Path: f.path, Err: err})
		return
	}
	if uint64(st.Ino) != f.l.ino || uint64(st.Dev) != f.l.dev {
		_ = f.load()
		return
	}
	if !f.l.current() {
		_ = f.load()
		return
	}
	if f.opts.PIDCheck && !f.l.processAlive(f.l.hdr) {
		f.unload(fmt.Errorf("mmv: %s: %w (pid %d)", f.path, ErrProcessGone, f.l.hdr.process))
	}
}

// Generation returns the file's creation time (from g1), the start time of
// the counters of every metric of the file (source.Generations); zero when
// the file is not exported now.
func (f *File) Generation(semantics.PMID) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.l == nil {
		return time.Time{}
	}
	return genTime(f.l.gen)
}

// Err returns why the file is not exported now (nil when it is).
func (f *File) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refresh()
	return f.err
}

// Status returns the file's status.
func (f *File) Status() FileStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.l == nil {
		s := FileStatus{Name: filepath.Base(f.path), Path: f.path}
		if f.err != nil {
			s.Reason = f.err.Error()
		}
		return s
	}
	return f.l.status()
}

// Metrics returns the metadata of the file's metrics in name order.
func (f *File) Metrics() []source.Metric {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refresh()
	if f.v == nil {
		return nil
	}
	return f.v.metricList()
}

// Instances returns the instances of an instance domain in id order, as
// the file was at the last Metrics or Fetch (no reload here, so that the
// instances of a fetch's values come from the file the values came from).
func (f *File) Instances(indom semantics.InDom) []source.Instance {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.v == nil {
		return nil
	}
	return f.v.instances(indom)
}

// Fetch reads the current values (t is ignored). A PMID the file does not
// export gets semantics.ErrPMID in its ValueSet.
func (f *File) Fetch(_ time.Time, pmids []semantics.PMID, res *source.Result) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	prepare(res, len(pmids))
	for attempt := 0; ; attempt++ {
		f.refresh()
		res.Time = time.Now()
		if f.v == nil {
			fillMissing(pmids, res)
			return nil
		}
		var ok bool
		if err := guard(f.mappings, f.path, func() { ok = f.v.fill(pmids, res, res.Time) }); err != nil {
			f.unload(err) // mapped again, at its new size, by the next refresh
			continue
		}
		if ok {
			return nil
		}
		if attempt == fetchAttempts {
			return fmt.Errorf("mmv: %s: file changed generation during %d reads", f.path, fetchAttempts+1)
		}
	}
}

func fillMissing(pmids []semantics.PMID, res *source.Result) {
	for i, id := range pmids {
		res.Sets[i].PMID, res.Sets[i].Err, res.Sets[i].Values = id, semantics.ErrPMID, res.Sets[i].Values[:0]
	}
}

// Close unmaps the file.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unload(errors.New("mmv: file closed"))
	return nil
}

// ----------------------------------------------------------------------------
// Dir

// Dir is a directory of MMV files exported as pmdammv exports
// $PCP_TMP_DIR/mmv: files are scanned in name order, names starting with
// "." and non-regular files are ignored, clusters are taken from the
// headers or assigned (lowest unused number from 1), and the whole
// directory is reloaded when it changes (mtime), when a file changes
// generation, when a PROCESS writer exits, or when a file was in flux.
//
// The directory is listed again by Metrics (and Files), not by Fetch: a
// fetch reads the files the last Metrics listed (still mapped when renamed
// or removed since) and reloads only when one of them changed generation,
// was cut short or lost its writer. A directory whose entries change
// without end (a file swapped with a FIFO in a loop) thus still gives each
// reader one metric set from Metrics to Fetch (see MetricsEpoch).
type Dir struct {
	dir  string
	opts Options
	log  *slog.Logger

	mu        sync.Mutex
	v         *view
	status    []FileStatus
	stamp     dirStamp
	stampErr  error
	reloadDue bool // at the next listing refresh: a file was in flux
	fetchDue  bool // at the next refresh: a fetch found a file changed or cut short
	loadedAt  bool
	closed    bool
	loading   []*loaded // the files of a reload in progress
	sig       string    // names, inodes and sizes at the last scan
	unwritten []string  // files skipped at the last reload as not yet written
	epoch     uint64    // incremented when a reload changes viewSig
	viewSig   string    // the files of the view: name, cluster, device, inode, generation
	// what the last reload logged, so that a reload logs changes only:
	// the files whose problems were logged, the reasons of skipped files
	logged  map[fileKey]struct{}
	skipLog map[string]string
}

// fileKey names one generation of one file.
type fileKey struct{ dev, ino, gen uint64 }

// signature describes the directory's entries (name, inode, size)
// to notice changes its mtime does not show.
func (d *Dir) signature() string {
	ents, err := os.ReadDir(d.dir)
	if err != nil {
		return err.Error()
	}
	var b []byte
	for _, e := range ents {
		var st unix.Stat_t
		if unix.Stat(filepath.Join(d.dir, e.Name()), &st) != nil {
			continue
		}
		b = fmt.Appendf(b, "%s\x00%d %d %d\n", e.Name(), st.Dev, st.Ino, st.Size)
	}
	return string(b)
}

var (
	_ source.Source      = (*Dir)(nil)
	_ source.Monitored   = (*Dir)(nil)
	_ source.EpochLister = (*Dir)(nil)
)

type dirStamp struct {
	mtime    time.Time
	dev, ino uint64
}

// OpenDir opens a directory of MMV files. A directory that does not exist
// (yet) exports nothing until it appears; any other error is returned.
func OpenDir(dir string, opts Options) (*Dir, error) {
	d := &Dir{dir: dir, opts: opts, log: opts.logger()}
	st, err := os.Stat(dir)
	switch {
	case err == nil && !st.IsDir():
		return nil, fmt.Errorf("mmv: %s: not a directory", dir)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("mmv: %w", err)
	}
	d.refresh(true)
	return d, nil
}

// Path returns the directory.
func (d *Dir) Path() string { return d.dir }

func (d *Dir) stampNow() (dirStamp, error) {
	var st unix.Stat_t
	if err := unix.Stat(d.dir, &st); err != nil {
		return dirStamp{}, &os.PathError{Op: "stat", Path: d.dir, Err: err}
	}
	return dirStamp{mtime: time.Unix(st.Mtim.Unix()), dev: uint64(st.Dev), ino: uint64(st.Ino)}, nil
}

// refresh reloads the directory when pmdammv would (listing: the
// directory changed too, else only when a file of the view went bad). A
// file cut short under its mapping makes it reload (mapping every file
// again, at its size now).
func (d *Dir) refresh(listing bool) {
	for i := 0; ; i++ {
		err := guard(d.mappings, d.dir, func() { d.refreshMapped(listing) })
		if err == nil {
			return
		}
		d.log.Warn("mmv: reloading the directory", "reason", err)
		d.fetchDue, d.loading = true, nil
		if i == 2 { // cut short again and again: export nothing this time
			d.v = buildView(nil, d.log)
			return
		}
	}
}

// mappings are the files of the view, or of the reload in progress.
func (d *Dir) mappings() []*mapping {
	var ms []*mapping
	if d.v != nil {
		for _, f := range d.v.files {
			ms = append(ms, f.mapping)
		}
	}
	for _, f := range d.loading {
		ms = append(ms, f.mapping)
	}
	return ms
}

// refreshMapped reloads when a file of the view changed generation or lost
// its writer, or a fetch found it changed (fetchDue); with listing also
// when the directory changed or a file skipped at the last reload may be
// ready now.
func (d *Dir) refreshMapped(listing bool) {
	if d.closed {
		return
	}
	need := d.fetchDue || !d.loadedAt
	if !need && d.v != nil {
		for _, f := range d.v.files {
			if !f.current() || (d.opts.PIDCheck && !f.processAlive(f.hdr)) {
				need = true
				break
			}
		}
	}
	if !need && !listing {
		return
	}
	need = need || d.reloadDue
	stamp, err := d.stampNow()
	if err != nil {
		if d.stampErr == nil || d.stampErr.Error() != err.Error() {
			need = true
		}
	} else if d.stampErr != nil || stamp != d.stamp {
		need = true
	}
	if !need && err == nil && time.Since(stamp.mtime) < 2*time.Second && d.signature() != d.sig {
		// Directory timestamps are coarse (a clock tick): changes made in
		// the tick of the last scan do not change the mtime again.
		need = true
	}
	for _, p := range d.unwritten {
		if !need && !notYetWritten(p) {
			// written in place since: no directory change shows it
			need = true
		}
	}
	if need {
		d.stamp, d.stampErr = stamp, err
		d.reload()
	}
}

// Epoch numbers the directory's metric set (source.Epoched): it changes
// when a reload exports other files, other generations of them, or other
// cluster numbers; a reload that finds the same files (another file still
// in flux, a directory change that exports nothing new) keeps it.
func (d *Dir) Epoch() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.epoch
}

// reload is pmdammv's map_stats.
func (d *Dir) reload() {
	if d.v != nil {
		for _, f := range d.v.files {
			f.unmap()
		}
	}
	d.v, d.status, d.reloadDue, d.fetchDue, d.loadedAt = nil, nil, false, false, true
	d.unwritten = d.unwritten[:0]
	d.sig = d.signature()
	ents, err := os.ReadDir(d.dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		d.log.Warn("mmv: cannot read directory", "dir", d.dir, "err", err)
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	var files []*loaded
	used := map[uint32]bool{}
	var statuses []FileStatus
	skipLog := make(map[string]string)
	skipped := func(name, path string, err error, warn bool) {
		reason := err.Error()
		statuses = append(statuses, FileStatus{Name: name, Path: path, Reason: reason})
		skipLog[name] = reason
		if d.skipLog[name] == reason {
			return // logged at an earlier reload
		}
		if warn {
			d.log.Warn("mmv: file not exported", "file", path, "reason", reason)
		} else {
			d.log.Info("mmv: file not exported", "file", path, "reason", reason)
		}
	}
	for _, e := range ents {
		name := e.Name()
		if name[0] == '.' {
			continue
		}
		path := filepath.Join(d.dir, name)
		st, err := os.Stat(path)
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		m, err := mapFile(path, name, d.opts.PIDCheck)
		if err != nil {
			if errors.Is(err, ErrInFlux) {
				d.reloadDue = true
			} else if notYetWritten(path) {
				d.unwritten = append(d.unwritten, path)
			}
			skipped(name, path, err, false)
			continue
		}
		cluster, err := chooseCluster(m.hdr.cluster, used)
		if err != nil {
			m.unmap()
			skipped(name, path, &FormatError{File: path, Off: 36, Msg: err.Error()}, true)
			continue
		}
		used[cluster] = true
		files = append(files, &loaded{mapping: m, cluster: cluster})
		d.loading = files
	}
	logged := make(map[fileKey]struct{}, len(files))
	for _, f := range files {
		k := fileKey{f.dev, f.ino, f.gen}
		_, f.quiet = d.logged[k]
		logged[k] = struct{}{}
	}
	d.logged, d.skipLog = logged, skipLog
	d.v = buildView(files, d.log)
	d.loading = nil
	var sig []byte
	for _, f := range files {
		statuses = append(statuses, f.status())
		sig = fmt.Appendf(sig, "%s\x00%d %d %d %d\n", f.name, f.cluster, f.dev, f.ino, f.gen)
	}
	if string(sig) != d.viewSig || d.epoch == 0 {
		d.viewSig = string(sig)
		d.epoch++
	}
	sort.SliceStable(statuses, func(i, j int) bool { return statuses[i].Name < statuses[j].Name })
	d.status = statuses
}

// notYetWritten reports whether path looks like an MMV file its writer
// has created but not filled yet: shorter than the header (between open
// and ftruncate) or with a zero magic (between ftruncate and the header
// write). pmdammv skips such a file until the directory changes again;
// the writer's next steps change neither the directory's mtime nor
// (after ftruncate) the file's size, so the file would stay unexported.
func notYetWritten(path string) bool {
	fd, st, err := openRegular(path)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var magic [4]byte
	n, _ := unix.Pread(fd, magic[:], 0)
	return n < len(magic) || st.Size < headerSize || magic == [4]byte{}
}

// chooseCluster is pmdammv's choose_cluster: a non-zero header cluster is
// used as is (even when another file uses it), 0 gets the lowest unused
// number from 1.
func chooseCluster(requested int32, used map[uint32]bool) (uint32, error) {
	if requested == 0 {
		for c := uint32(1); c <= maxCluster; c++ {
			if !used[c] {
				return c, nil
			}
		}
		return 0, errors.New("no free cluster number")
	}
	if requested < 0 || requested > maxCluster {
		return 0, fmt.Errorf("cluster %d outside 0..%d", requested, maxCluster)
	}
	return uint32(requested), nil
}

// Status reports the directory missing (source.ReasonMissing, the path in
// Detail) while it does not exist, and an error while it cannot be read;
// it is up otherwise, with or without files. It answers from the last
// refresh (the last Metrics or Fetch), without reading the directory.
func (d *Dir) Status(time.Time) source.Status {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.stampErr == nil:
		return source.Status{Lag: -1}
	case errors.Is(d.stampErr, fs.ErrNotExist):
		return source.Status{Reason: source.ReasonMissing, Detail: fmt.Sprintf("MMV directory %s does not exist", d.dir), Lag: -1}
	}
	return source.Status{Reason: source.ReasonError, Detail: d.stampErr.Error(), Lag: -1}
}

// Files returns the status of every file seen at the last reload, in name
// order: exported ones and skipped ones with their reasons.
func (d *Dir) Files() []FileStatus {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.refresh(true)
	return append([]FileStatus(nil), d.status...)
}

// FileCounts returns how many files of the last reload are exported and how
// many are skipped (source.FileSet), without listing the directory again.
func (d *Dir) FileCounts() (exported, skipped int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, f := range d.status {
		if f.Exported {
			exported++
		} else {
			skipped++
		}
	}
	return exported, skipped
}

// Generation returns the generation (creation time) of the file that
// exports pmid, zero if none does (source.Generations).
func (d *Dir) Generation(pmid semantics.PMID) time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.v == nil || d.v.byPMID[pmid] == nil {
		return time.Time{}
	}
	return genTime(d.v.byPMID[pmid].file.gen)
}

// Metrics returns the metadata of every exported metric in name order.
func (d *Dir) Metrics() []source.Metric {
	ms, _ := d.MetricsEpoch()
	return ms
}

// MetricsEpoch returns Metrics and the epoch they belong to, read together
// (source.EpochLister): the directory is listed again here, so an Epoch
// call before or after Metrics may name another metric set.
func (d *Dir) MetricsEpoch() ([]source.Metric, uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.refresh(true)
	return d.v.metricList(), d.epoch
}

// Instances returns the instances of an instance domain in id order, as
// the files were at the last Metrics or Fetch (no rescan here, so that the
// instances of a fetch's values come from the files the values came from).
func (d *Dir) Instances(indom semantics.InDom) []source.Instance {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.loadedAt {
		d.refresh(true)
	}
	return d.v.instances(indom)
}

// Fetch reads the current values of the files the last Metrics listed (t
// is ignored). A PMID no file exports gets semantics.ErrPMID in its
// ValueSet.
func (d *Dir) Fetch(_ time.Time, pmids []semantics.PMID, res *source.Result) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	prepare(res, len(pmids))
	for attempt := 0; ; attempt++ {
		d.refresh(false)
		res.Time = time.Now()
		var ok bool
		if err := guard(d.mappings, d.dir, func() { ok = d.v.fill(pmids, res, res.Time) }); err != nil {
			d.log.Warn("mmv: reloading the directory", "reason", err)
			ok = false
		}
		if ok {
			return nil
		}
		d.fetchDue = true
		if attempt == fetchAttempts {
			return fmt.Errorf("mmv: %s: files changed generation during %d reads", d.dir, fetchAttempts+1)
		}
	}
}

// Close unmaps every file.
func (d *Dir) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.v != nil {
		for _, f := range d.v.files {
			f.unmap()
		}
	}
	d.v = buildView(nil, nil)
	d.status, d.closed = nil, true
	d.epoch++
	return nil
}

package mmv

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// header is the decoded 40-byte MMV header.
type header struct {
	version int32
	g1, g2  uint64
	tocs    int32
	flags   Flags
	process int32
	cluster int32
}

// Reasons a file is not (yet) exported; they mirror pmdammv's return codes.
var (
	// ErrInFlux means the writer has not finished the file (g1 == 0 or
	// g1 != g2); pmdammv retries on the next request.
	ErrInFlux = errors.New("generation in flux (file being written)")
	// ErrProcessGone means the PROCESS flag is set and the writer's PID no
	// longer exists.
	ErrProcessGone = errors.New("writer process is not running")
)

// mapping is one MMV file mapped read-only.
type mapping struct {
	path string
	name string // file name, used in metric names
	data []byte // the mmap; nil for an empty file
	dev  uint64
	ino  uint64
	disk uint64 // bytes stored on disk (diskBytes), at most len(data)
	hdr  header
	gen  uint64 // g1 == g2 when the file was loaded
}

// mapFile opens and maps path and checks its header as pmdammv's
// create_client_stat does. The returned error is a *FormatError, ErrInFlux,
// ErrProcessGone (only with pidCheck) or an I/O error.
func mapFile(path, name string, pidCheck bool) (*mapping, error) {
	fd, st, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	size := st.Size
	if size < headerSize {
		return nil, &FormatError{File: path, Off: 0, Msg: fmt.Sprintf("file of %d bytes is smaller than the %d-byte header", size, headerSize)}
	}
	if size > 1<<32-1 {
		return nil, &FormatError{File: path, Off: 0, Msg: fmt.Sprintf("file of %d bytes is larger than 4 GiB", size)}
	}
	data, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmv: %s: mmap: %w", path, err)
	}
	m := &mapping{path: path, name: name, data: data, dev: uint64(st.Dev), ino: uint64(st.Ino), disk: diskBytes(st)}
	if err := m.checkHeader(pidCheck); err != nil {
		m.unmap()
		return nil, err
	}
	return m, nil
}

// openRegular opens path for reading without blocking and returns the
// descriptor only when it is a regular file. The type is checked on the
// descriptor, not the name: a FIFO or device renamed over the name after
// a stat would otherwise block the open (a FIFO waits for a writer)
// while the caller holds its lock.
func openRegular(path string) (int, *unix.Stat_t, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return -1, nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, nil, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("mmv: %s: not a regular file (%s)", path, fileType(st.Mode))
	}
	return fd, &st, nil
}

// fileType names the type bits of a stat mode.
func fileType(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "a FIFO"
	case unix.S_IFCHR:
		return "a character device"
	case unix.S_IFBLK:
		return "a block device"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFLNK:
		return "a symbolic link"
	}
	return fmt.Sprintf("mode %#o", mode&unix.S_IFMT)
}

// diskBytes is how much of a file is stored (its blocks), which bounds
// what decoding may allocate: a sparse file's holes read as zeros and
// cost no disk, so its apparent size says nothing about what its writer
// put in it. Filesystems that report no blocks count at their size.
func diskBytes(st *unix.Stat_t) uint64 {
	if st.Blocks <= 0 {
		return uint64(st.Size)
	}
	return min(uint64(st.Blocks)*512, uint64(st.Size))
}

func (m *mapping) unmap() {
	if m.data != nil {
		_ = unix.Munmap(m.data)
		m.data = nil
	}
}

// gens reads g1 and g2 atomically (the writer stores them last and first).
func (m *mapping) gens() (uint64, uint64) {
	if len(m.data) < headerSize {
		return 0, 1
	}
	p := unsafe.Pointer(&m.data[0])
	if uintptr(p)%8 != 0 { // never for an mmap, which is page aligned
		return ne.Uint64(m.data[8:]), ne.Uint64(m.data[16:])
	}
	g1 := atomic.LoadUint64((*uint64)(unsafe.Add(p, 8)))
	g2 := atomic.LoadUint64((*uint64)(unsafe.Add(p, 16)))
	return g1, g2
}

// current reports whether the file still holds the generation it was loaded with.
func (m *mapping) current() bool {
	g1, g2 := m.gens()
	return g1 == m.gen && g2 == m.gen
}

func (m *mapping) checkHeader(pidCheck bool) error {
	b := m.data
	if string(b[0:4]) != "MMV\x00" {
		return &FormatError{File: m.path, Off: 0, Msg: fmt.Sprintf("bad magic %q, want \"MMV\\x00\"", b[0:4])}
	}
	d := decoder(b)
	d.Skip(4)
	h := header{version: d.I32()}
	d.Skip(16) // the generations, read atomically (gens)
	h.tocs, h.flags, h.process, h.cluster = d.I32(), Flags(d.U32()), d.I32(), d.I32()
	if err := d.Err(); err != nil { // cannot happen: the mapping holds a header
		return fileErr(err, m.path)
	}
	h.g1, h.g2 = m.gens()
	if h.version < 1 || h.version > 3 {
		return &FormatError{File: m.path, Off: 4, Msg: fmt.Sprintf("unsupported version %d", h.version)}
	}
	if h.g1 == 0 || h.g1 != h.g2 {
		return fmt.Errorf("mmv: %s: %w", m.path, ErrInFlux)
	}
	if h.tocs < 2 {
		return &FormatError{File: m.path, Off: 24, Msg: fmt.Sprintf("%d TOC entries, need at least 2", h.tocs)}
	}
	if h.tocs > maxTOCs {
		return &FormatError{File: m.path, Off: 24, Msg: fmt.Sprintf("%d TOC entries, more than %d (the format has 6 section types, each listed once; libpcp writes at most 6)", h.tocs, maxTOCs)}
	}
	if uint64(len(b)) < headerSize+tocSize*uint64(h.tocs) {
		return &FormatError{File: m.path, Off: 24, Msg: fmt.Sprintf("%d TOC entries do not fit in %d bytes", h.tocs, len(b))}
	}
	if pidCheck && !m.processAlive(h) {
		return fmt.Errorf("mmv: %s: %w (pid %d)", m.path, ErrProcessGone, h.process)
	}
	m.hdr = h
	m.gen = h.g1
	return nil
}

// processAlive applies the PROCESS flag: true unless the flag is set with a
// non-zero PID that does not exist.
func (m *mapping) processAlive(h header) bool {
	if h.flags&FlagProcess == 0 || h.process == 0 {
		return true
	}
	return processExists(h.process)
}

// processExists reports whether pid names a live process (kill(pid, 0)
// succeeds or fails with EPERM), as __pmProcessExists.
func processExists(pid int32) bool {
	if pid <= 0 {
		return false
	}
	err := unix.Kill(int(pid), 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

// genTime returns the creation time encoded in g1 (seconds<<32|usec).
func genTime(g uint64) time.Time {
	return time.Unix(int64(g>>32), int64(g&0xffffffff)*1000)
}

// guard runs f with a fault on mapped memory turned into an error: a file
// cut short under its mapping (truncated in place rather than re-created,
// as libpcp_mmv does) raises SIGBUS on the pages past its new end, which
// would otherwise kill the process. The error names the file of ms that
// holds the faulting address and the offset in it (else dflt, offset -1).
func guard(ms func() []*mapping, dflt string, f func()) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		e := recover()
		if e == nil {
			return
		}
		fault, ok := e.(interface{ Addr() uintptr })
		if !ok {
			panic(e)
		}
		addr := fault.Addr()
		fe := &FormatError{File: dflt, Off: -1, Msg: "file cut short while mapped (bus error past its end)"}
		for _, m := range ms() {
			if len(m.data) == 0 {
				continue
			}
			base := uintptr(unsafe.Pointer(&m.data[0]))
			if addr >= base && addr-base < uintptr(len(m.data)) {
				fe.File, fe.Off = m.path, int64(addr-base)
			}
		}
		err = fe
	}()
	f()
	return nil
}

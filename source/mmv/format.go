package mmv

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
)

// Layout constants of the MMV format (mmv_dev.h, mmv_stats.h).
const (
	// Domain is pmdammv's PMDA domain number.
	Domain = 70

	NameMax   = 64  // MMV_NAMEMAX: v1 names, including the NUL
	StringMax = 256 // MMV_STRINGMAX: one string slot, including the NUL
	LabelMax  = 244 // MMV_LABELMAX: a label's JSON payload, including the NUL

	headerSize    = 40
	tocSize       = 16
	indomSize     = 32
	instance1Size = 80
	instance2Size = 24
	metric1Size   = 104
	metric2Size   = 48
	valueSize     = 32
	stringSize    = StringMax
	labelSize     = 256

	// maxTOCs bounds a header's TOC count: six section types exist and a
	// second entry of a type is ignored, so a longer TOC holds nothing
	// but room for types a later format may add.
	maxTOCs = 16

	// pmdammv's limits on section counts (a larger section is skipped).
	maxMetrics = 1023
	maxInDoms  = 1<<22 - 1
	maxLabels  = 255
	maxCluster = 1<<12 - 1
	maxItem    = 1<<10 - 1
	maxSerial  = 1<<22 - 1
)

// TOC section types (MMV_TOC_*).
const (
	tocInDoms    = 1
	tocInstances = 2
	tocMetrics   = 3
	tocValues    = 4
	tocStrings   = 5
	tocLabels    = 6
)

// Flags are the header flags of an MMV file (mmv_stats_flags_t).
type Flags uint32

// Header flags.
const (
	// FlagNoPrefix names metrics mmv.<metric> instead of mmv.<file>.<metric>.
	FlagNoPrefix Flags = 0x1
	// FlagProcess exports the file only while the writer's PID lives.
	FlagProcess Flags = 0x2
	// FlagSentinel marks "no value" with sentinel patterns.
	FlagSentinel Flags = 0x4
)

// MetricType is an MMV metric type (mmv_metric_type_t).
type MetricType int32

// MMV metric types. They equal the PCP types except Elapsed, which pmdammv
// exports as a 64-bit counter of microseconds.
const (
	TypeNoSupport MetricType = -1
	TypeI32       MetricType = 0
	TypeU32       MetricType = 1
	TypeI64       MetricType = 2
	TypeU64       MetricType = 3
	TypeFloat     MetricType = 4
	TypeDouble    MetricType = 5
	TypeString    MetricType = 6
	TypeElapsed   MetricType = 9
)

func (t MetricType) valid() bool { return t >= TypeI32 && t <= TypeString || t == TypeElapsed }

// String returns the mmv_stats.h name without its prefix ("I32", "ELAPSED").
func (t MetricType) String() string {
	switch t {
	case TypeNoSupport:
		return "NOSUPPORT"
	case TypeI32:
		return "I32"
	case TypeU32:
		return "U32"
	case TypeI64:
		return "I64"
	case TypeU64:
		return "U64"
	case TypeFloat:
		return "FLOAT"
	case TypeDouble:
		return "DOUBLE"
	case TypeString:
		return "STRING"
	case TypeElapsed:
		return "ELAPSED"
	}
	return fmt.Sprintf("type(%d)", int32(t))
}

// DefaultDir returns the directory pmdammv reads: $PCP_TMP_DIR/mmv, else
// /var/lib/pcp/tmp/mmv.
func DefaultDir() string {
	if d := os.Getenv("PCP_TMP_DIR"); d != "" {
		return filepath.Join(d, "mmv")
	}
	return "/var/lib/pcp/tmp/mmv"
}

// FormatError reports a malformed MMV file: the file, the byte offset of the
// offending field and what is wrong with it.
type FormatError struct {
	File string
	Off  int64
	Msg  string
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("mmv: %s: byte offset %d: %s", e.File, e.Off, e.Msg)
}

// ne is the host byte order that MMV files use.
var ne = binary.NativeEndian

// decoder reads fields of a mapped file with bounds checks. The first
// failure is sticky: later reads return zero and err keeps the first error.
type decoder struct {
	file string
	b    []byte
	err  error
}

func (d *decoder) fail(off uint64, format string, args ...any) {
	if d.err == nil {
		d.err = &FormatError{File: d.file, Off: int64(min(off, 1<<62)), Msg: fmt.Sprintf(format, args...)}
	}
}

// has reports whether n bytes at off lie inside the file.
func (d *decoder) has(off, n uint64) bool {
	return off <= uint64(len(d.b)) && n <= uint64(len(d.b))-off
}

func (d *decoder) u32(off uint64) uint32 {
	if d.err != nil {
		return 0
	}
	if !d.has(off, 4) {
		d.fail(off, "4-byte field past end of file (size %d)", len(d.b))
		return 0
	}
	return ne.Uint32(d.b[off:])
}

func (d *decoder) i32(off uint64) int32 { return int32(d.u32(off)) }

func (d *decoder) u64(off uint64) uint64 {
	if d.err != nil {
		return 0
	}
	if !d.has(off, 8) {
		d.fail(off, "8-byte field past end of file (size %d)", len(d.b))
		return 0
	}
	return ne.Uint64(d.b[off:])
}

// cstr returns the NUL-terminated text of the n-byte field at off, at most
// n-1 bytes (pmdammv forces the last byte of a field to NUL). It does not
// make the error sticky: callers decide whether a bad string skips an entry.
func cstr(b []byte, off, n uint64) ([]byte, bool) {
	if off > uint64(len(b)) || n > uint64(len(b))-off {
		return nil, false
	}
	f := b[off : off+n-1]
	for i, c := range f {
		if c == 0 {
			return f[:i], true
		}
	}
	return f, true
}

// inBounds reports whether n bytes at off lie inside b.
func inBounds(b []byte, off, n uint64) bool {
	return off <= uint64(len(b)) && n <= uint64(len(b))-off
}

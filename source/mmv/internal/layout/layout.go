// Package layout holds what the MMV reader (package mmv) and writer
// (package mmvwrite) share of the Memory Mapped Value format: the sizes,
// limits and section types of mmv_dev.h and mmv_stats.h, the metric types,
// the header flags, the generation's encoding and the default directory.
package layout

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Sizes and limits (mmv_dev.h, mmv_stats.h, pmdammv).
const (
	NameMax   = 64  // MMV_NAMEMAX: v1 names, including the NUL
	StringMax = 256 // MMV_STRINGMAX: one string slot, including the NUL
	LabelMax  = 244 // MMV_LABELMAX: a label's JSON payload, including the NUL

	HeaderSize    = 40
	TOCSize       = 16
	InDomSize     = 32
	Instance1Size = 80
	Instance2Size = 24
	Metric1Size   = 104
	Metric2Size   = 48
	ValueSize     = 32
	StringSize    = StringMax
	LabelSize     = 256

	// pmdammv's limits on section counts (a larger section is skipped)
	// and on identifiers.
	MaxMetrics = 1023
	MaxInDoms  = 1<<22 - 1
	MaxLabels  = 255
	MaxCluster = 1<<12 - 1
	MaxItem    = 1<<10 - 1
	MaxSerial  = 1<<22 - 1
)

// TOC section types (MMV_TOC_*).
const (
	TOCInDoms    = 1
	TOCInstances = 2
	TOCMetrics   = 3
	TOCValues    = 4
	TOCStrings   = 5
	TOCLabels    = 6
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

// Valid reports whether pmdammv exports metrics of type t.
func (t MetricType) Valid() bool { return t >= TypeI32 && t <= TypeString || t == TypeElapsed }

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

// NE is the host byte order that MMV files use.
var NE = binary.NativeEndian

// GenTime returns the creation time a generation (g1) encodes:
// seconds<<32 | microseconds.
func GenTime(g uint64) time.Time {
	return time.Unix(int64(g>>32), int64(g&0xffffffff)*1000)
}

// Singular reports whether an indom serial stands for no instance domain.
func Singular(indom uint32) bool { return indom == 0 || indom == 0xffffffff }

// IsAlpha reports whether c is an ASCII letter (a name's first character).
func IsAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

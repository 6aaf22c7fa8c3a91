package mmv

import (
	"fmt"

	"github.com/pcp-exporter/pcp-exporter/internal/pcpwire"
	"github.com/pcp-exporter/pcp-exporter/source/mmv/internal/layout"
)

// Layout constants of the MMV format (mmv_dev.h, mmv_stats.h), shared with
// the writer (package mmvwrite).
const (
	// Domain is pmdammv's PMDA domain number.
	Domain = 70

	NameMax   = layout.NameMax   // MMV_NAMEMAX: v1 names, including the NUL
	StringMax = layout.StringMax // MMV_STRINGMAX: one string slot, including the NUL
	LabelMax  = layout.LabelMax  // MMV_LABELMAX: a label's JSON payload, including the NUL

	headerSize    = layout.HeaderSize
	tocSize       = layout.TOCSize
	indomSize     = layout.InDomSize
	instance1Size = layout.Instance1Size
	instance2Size = layout.Instance2Size
	metric1Size   = layout.Metric1Size
	metric2Size   = layout.Metric2Size
	valueSize     = layout.ValueSize
	stringSize    = layout.StringSize
	labelSize     = layout.LabelSize

	// maxTOCs bounds a header's TOC count: six section types exist and a
	// second entry of a type is ignored, so a longer TOC holds nothing
	// but room for types a later format may add.
	maxTOCs = 16

	// pmdammv's limits on section counts (a larger section is skipped).
	maxMetrics = layout.MaxMetrics
	maxInDoms  = layout.MaxInDoms
	maxLabels  = layout.MaxLabels
	maxCluster = layout.MaxCluster
	maxItem    = layout.MaxItem
	maxSerial  = layout.MaxSerial
)

// TOC section types (MMV_TOC_*).
const (
	tocInDoms    = layout.TOCInDoms
	tocInstances = layout.TOCInstances
	tocMetrics   = layout.TOCMetrics
	tocValues    = layout.TOCValues
	tocStrings   = layout.TOCStrings
	tocLabels    = layout.TOCLabels
)

// Flags are the header flags of an MMV file (mmv_stats_flags_t).
type Flags = layout.Flags

// Header flags.
const (
	// FlagNoPrefix names metrics mmv.<metric> instead of mmv.<file>.<metric>.
	FlagNoPrefix = layout.FlagNoPrefix
	// FlagProcess exports the file only while the writer's PID lives.
	FlagProcess = layout.FlagProcess
	// FlagSentinel marks "no value" with sentinel patterns.
	FlagSentinel = layout.FlagSentinel
)

// MetricType is an MMV metric type (mmv_metric_type_t); its String method
// gives the mmv_stats.h name without its prefix ("I32", "ELAPSED").
type MetricType = layout.MetricType

// MMV metric types. They equal the PCP types except Elapsed, which pmdammv
// exports as a 64-bit counter of microseconds.
const (
	TypeNoSupport = layout.TypeNoSupport
	TypeI32       = layout.TypeI32
	TypeU32       = layout.TypeU32
	TypeI64       = layout.TypeI64
	TypeU64       = layout.TypeU64
	TypeFloat     = layout.TypeFloat
	TypeDouble    = layout.TypeDouble
	TypeString    = layout.TypeString
	TypeElapsed   = layout.TypeElapsed
)

// DefaultDir returns the directory pmdammv reads: $PCP_TMP_DIR/mmv, else
// /var/lib/pcp/tmp/mmv.
func DefaultDir() string { return layout.DefaultDir() }

// FormatError reports a malformed MMV file: the file, the byte offset of the
// offending field and what is wrong with it.
type FormatError struct {
	File string
	Off  int64
	Msg  string
}

// Error returns the file, the byte offset and the message.
func (e *FormatError) Error() string {
	return fmt.Sprintf("mmv: %s: byte offset %d: %s", e.File, e.Off, e.Msg)
}

// ne is the host byte order that MMV files use.
var ne = layout.NE

// decoder returns a decoder of the fields of a file's data, in the host's
// byte order as MMV files hold them; fileErr names the file in its errors.
func decoder(data []byte) pcpwire.Decoder { return pcpwire.NewHostDecoder(data, 0, "file") }

// fileErr turns a decoding error (a *pcpwire.Error) of the file at path
// into a FormatError; other errors are returned as they are.
func fileErr(err error, path string) error {
	if we, ok := err.(*pcpwire.Error); ok {
		return &FormatError{File: path, Off: we.Offset, Msg: we.Msg}
	}
	return err
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

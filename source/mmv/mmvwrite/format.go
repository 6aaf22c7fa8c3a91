package mmvwrite

import "github.com/pcp-exporter/pcp-exporter/source/mmv/internal/layout"

// Limits of the format (mmv_stats.h).
const (
	NameMax   = layout.NameMax   // MMV_NAMEMAX: a version 1 name, including the NUL
	StringMax = layout.StringMax // MMV_STRINGMAX: a string value, including the NUL
	LabelMax  = layout.LabelMax  // MMV_LABELMAX: a label's JSON payload, including the NUL
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

// MetricType is an MMV metric type (mmv_metric_type_t).
type MetricType = layout.MetricType

// MMV metric types. They equal the PCP types except Elapsed, a 64-bit
// counter of microseconds that Handle.IntervalStart and IntervalEnd keep.
const (
	TypeI32     = layout.TypeI32
	TypeU32     = layout.TypeU32
	TypeI64     = layout.TypeI64
	TypeU64     = layout.TypeU64
	TypeFloat   = layout.TypeFloat
	TypeDouble  = layout.TypeDouble
	TypeString  = layout.TypeString
	TypeElapsed = layout.TypeElapsed
)

// DefaultDir returns the directory pmdammv reads, where a relative path
// given to New lives: $PCP_TMP_DIR/mmv, else /var/lib/pcp/tmp/mmv.
func DefaultDir() string { return layout.DefaultDir() }

package semantics

import "strconv"

// Type is a PCP value type (PM_TYPE_*).
type Type int32

// PCP value types.
const (
	TypeNoSupport       Type = -1
	Type32              Type = 0
	TypeU32             Type = 1
	Type64              Type = 2
	TypeU64             Type = 3
	TypeFloat           Type = 4
	TypeDouble          Type = 5
	TypeString          Type = 6
	TypeAggregate       Type = 7
	TypeAggregateStatic Type = 8
	TypeEvent           Type = 9
	TypeHighresEvent    Type = 10
)

var typeNames = [...]string{"32", "u32", "64", "u64", "float", "double", "string", "aggregate", "aggregate_static", "event", "highres_event"}

// String returns the lower-case word used by the CLI contract ("u64", "double", ...).
func (t Type) String() string {
	if t >= 0 && int(t) < len(typeNames) {
		return typeNames[t]
	}
	if t == TypeNoSupport {
		return "nosupport"
	}
	return "type-" + strconv.Itoa(int(t))
}

// IsNumeric reports whether values of t are numbers (32, u32, 64, u64, float, double).
func (t Type) IsNumeric() bool { return t >= Type32 && t <= TypeDouble }

// Sem is a PCP metric semantics (PM_SEM_*).
type Sem int32

// PCP semantics.
const (
	SemCounter  Sem = 1
	SemInstant  Sem = 3
	SemDiscrete Sem = 4
)

// String returns "counter", "instant" or "discrete".
func (s Sem) String() string {
	switch s {
	case SemCounter:
		return "counter"
	case SemInstant:
		return "instant"
	case SemDiscrete:
		return "discrete"
	}
	return "sem-" + strconv.Itoa(int(s))
}

// Desc is a metric descriptor (pmDesc).
type Desc struct {
	PMID  PMID
	Type  Type
	InDom InDom
	Sem   Sem
	Units Units
}

package semantics

// LabelType is the level of the PCP label hierarchy a label comes from
// (PM_LABEL_*), lowest precedence first.
type LabelType uint8

// Label hierarchy levels; in merges a later level overrides an earlier one:
// context < domain < indom < cluster < item < instances.
const (
	LabelContext   LabelType = 0x01
	LabelDomain    LabelType = 0x02
	LabelInDom     LabelType = 0x04
	LabelCluster   LabelType = 0x08
	LabelItem      LabelType = 0x10
	LabelInstances LabelType = 0x20
	// LabelCompound and LabelOptional are flag bits of a pmLabel.
	LabelCompound LabelType = 0x40
	LabelOptional LabelType = 0x80
)

// Label is one PCP label: a name and its value as JSON text (a JSON string
// value keeps its quotes), with the flags byte of pmLabel (the level bit of
// the set it came from, plus COMPOUND and OPTIONAL).
type Label struct {
	Name  string
	Value string
	Flags LabelType
}

// LabelSet is a set of labels sorted by name, without duplicate names.
type LabelSet []Label

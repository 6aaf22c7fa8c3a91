package pcplog

import "github.com/pcp-exporter/pcp-exporter/semantics"

// The encodings of values libpcp accepts for a metric's type, and the
// errors of those it refuses.

// ErrEncoding is the error of a value set whose encoding contradicts its
// metric's descriptor: values in place (PM_VAL_INSITU) for a type that
// needs a value block (64-bit, double, string, aggregate, event), or value
// blocks for a 32-bit integer. libpcp refuses them: pmExtractValue answers
// PM_ERR_CONV for such a value read as is, and an interpolating pmFetch
// that meets one for a metric asked fails with PM_ERR_LOGREC ("Corrupted
// record in a PCP archive log", interp.c's update_bounds). It is
// semantics.PMError(PM_ERR_CONV) to errors.Is.
var ErrEncoding error = encodingError{}

type encodingError struct{}

func (encodingError) Error() string {
	return semantics.PMError(PMErrConv).Error() + " (value encoding contradicts the metric's type)"
}

func (encodingError) Is(target error) bool { return target == semantics.PMError(PMErrConv) }

// ErrValueBlock is the error of a value set read as is (not interpolated)
// holding a value block whose own type byte is neither its metric's type
// nor 0, or whose length is not its type's (8 bytes for a 64-bit integer
// or a double, 4 for a float). libpcp's pmExtractValue refuses that value
// (PM_ERR_CONV) and reads the others of the set; the set is refused here.
// libpcp's interpolation reads such a block by the metric's type, as a
// Replay does. It is semantics.PMError(PM_ERR_CONV) to errors.Is.
var ErrValueBlock error = valueBlockError{}

type valueBlockError struct{}

func (valueBlockError) Error() string {
	return semantics.PMError(PMErrConv).Error() + " (a value block's type or length contradicts the metric's type)"
}

func (valueBlockError) Is(target error) bool { return target == semantics.PMError(PMErrConv) }

// EncodingFits reports whether value format valfmt (in place, or value
// blocks) is the one libpcp accepts for type typ (interp.c's update_bounds:
// 32-bit integers in place, float either way, any other type in blocks).
func EncodingFits(valfmt uint32, typ semantics.Type) bool {
	switch typ {
	case semantics.Type32, semantics.TypeU32:
		return valfmt == semantics.ValInsitu
	case semantics.TypeFloat:
		return true
	case semantics.Type64, semantics.TypeU64, semantics.TypeDouble, semantics.TypeString,
		semantics.TypeAggregate, semantics.TypeAggregateStatic, semantics.TypeEvent, semantics.TypeHighresEvent:
		return valfmt != semantics.ValInsitu
	}
	return true // no type to contradict
}

// BlockFits reports whether a value block of header hdr (type byte, then
// length) is one pmExtractValue accepts for a metric of type typ: its own
// type typ or 0, and for a number its type's length.
func BlockFits(hdr uint32, typ semantics.Type) bool {
	if vt := semantics.Type(hdr >> 24); vt != 0 && vt != typ {
		return false
	}
	if n := NumberSize(typ); n > 0 {
		return int(hdr&0xffffff) == 4+n
	}
	return true
}

// NumberSize is the length in bytes of a value block's datum for the
// types libpcp reads from a block of a fixed length, 0 for the others.
func NumberSize(t semantics.Type) int {
	switch t {
	case semantics.Type64, semantics.TypeU64, semantics.TypeDouble:
		return 8
	case semantics.TypeFloat:
		return 4
	}
	return 0
}

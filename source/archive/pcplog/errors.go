package pcplog

import (
	"strconv"

	"github.com/pcp-exporter/pcp-exporter/semantics"
)

// FormatError reports corrupt or unsupported content of an archive file.
type FormatError struct {
	File string // path of the file
	Off  int64  // byte offset in the (uncompressed) file
	Msg  string
}

// Error returns the file, the offset and the message.
func (e *FormatError) Error() string {
	return e.File + ": offset " + strconv.FormatInt(e.Off, 10) + ": " + e.Msg
}

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

// PMErrConv and PMErrLogRec are PCP's PM_ERR_CONV and PM_ERR_LOGREC.
const (
	PMErrConv   = -12362
	PMErrLogRec = -12373
)

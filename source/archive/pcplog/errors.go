package pcplog

import (
	"errors"
	"strconv"
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

// PMErrConv and PMErrLogRec are PCP's PM_ERR_CONV and PM_ERR_LOGREC.
const (
	PMErrConv   = -12362
	PMErrLogRec = -12373
)

// errRefused is decodeBlocks' answer for a value block read as is that
// pmExtractValue refuses: the set is ErrValueBlock.
var errRefused = errors.New("value block refused")

package archive

import (
	"encoding/binary"
	"errors"

	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

// The format's types and errors, as pcplog declares them.
type (
	FormatError = pcplog.FormatError
	Label       = pcplog.Label
	IndexEntry  = pcplog.IndexEntry
)

// ErrEncoding and ErrValueBlock: see pcplog.
var (
	ErrEncoding   = pcplog.ErrEncoding
	ErrValueBlock = pcplog.ErrValueBlock
)

func be32(b []byte) uint32 { return binary.BigEndian.Uint32(b) }

// errRefused is decodeBlocks' answer for a value block read as is that
// pmExtractValue refuses: the set is ErrValueBlock.
var errRefused = errors.New("value block refused")

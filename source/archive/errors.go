package archive

import (
	"encoding/binary"
	"errors"

	"github.com/pcp-exporter/pcp-exporter/semantics"
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

// blockFits reports whether a value block of header hdr (type byte, then
// length) is one pmExtractValue accepts for a metric of type typ: its own
// type typ or 0, and for a number its type's length.
func blockFits(hdr uint32, typ semantics.Type) bool {
	if vt := semantics.Type(hdr >> 24); vt != 0 && vt != typ {
		return false
	}
	if n := numberSize(typ); n > 0 {
		return int(hdr&0xffffff) == 4+n
	}
	return true
}

// numberSize is the length in bytes of a value block's datum for the
// types libpcp reads from a block of a fixed length, 0 for the others.
func numberSize(t semantics.Type) int {
	switch t {
	case semantics.Type64, semantics.TypeU64, semantics.TypeDouble:
		return 8
	case semantics.TypeFloat:
		return 4
	}
	return 0
}

// encodingFits reports whether value format valfmt (in place, or value
// blocks) is the one libpcp accepts for type typ (interp.c's update_bounds:
// 32-bit integers in place, float either way, any other type in blocks).
func encodingFits(valfmt uint32, typ semantics.Type) bool {
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

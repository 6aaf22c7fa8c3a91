// Package pcplog is the file format of Performance Co-Pilot archives
// (versions 2 and 3), in the style of debug/elf: the label of each file,
// the temporal index's entries, the errors of corrupt content (FormatError,
// naming the file and byte offset), and the encodings of values libpcp
// accepts for a metric's type (EncodingFits, BlockFits) with the errors of
// those it refuses (ErrEncoding, ErrValueBlock).
// It imports nothing of the project but semantics.
//
// It is the first part of the split of source/archive (issue 33): the
// metadata, volume and record decoding, and the reader's read-ahead are to
// follow, as the API libpcp's replay (source/archive) needs.
package pcplog

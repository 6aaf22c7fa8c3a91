// Package pcplog is the file format of Performance Co-Pilot archives
// (versions 2 and 3), in the style of debug/elf: the label of each file,
// the temporal index's entries, and the errors of corrupt content
// (FormatError, naming the file and byte offset) and of values logged in an
// encoding their metric's type contradicts (ErrEncoding, ErrValueBlock).
// It imports nothing of the project but semantics.
//
// It is the first part of the split of source/archive (issue 33): the
// metadata, volume and record decoding, and the reader's read-ahead are to
// follow, as the API libpcp's replay (source/archive) needs.
package pcplog

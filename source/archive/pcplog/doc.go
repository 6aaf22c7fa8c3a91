// Package pcplog is the file format of Performance Co-Pilot archives
// (versions 2 and 3), in the style of debug/elf: Open reads an archive's
// label and its .meta file (descriptors with all names, instance domains
// with deltas applied, labels, help text) and its temporal index
// (IndexEntry); a Reader reads the records of every data volume in order,
// marks included, with exact values of every type. Plain and compressed
// files (.xz, .lzma, .bz2, .bz, .gz, .z, .zst) are read transparently,
// and an archive that pmlogger is still writing is read on with Refresh.
//
// Corrupt input gives a *FormatError naming the file and the byte offset;
// a truncated last record (a writer still at work) ends iteration cleanly.
// The encodings of values libpcp accepts for a metric's type are
// EncodingFits and BlockFits, those it refuses ErrEncoding and
// ErrValueBlock. What is allocated is bounded by the input's size.
//
// Iteration does not allocate per value: the Record and its slices are
// reused, and string or aggregate values alias the reader's buffer until
// the next call to Next (a RecordBuffer detaches them). For a replay that
// reads sparsely, Reader.SkipRun passes over a run of records with only
// their framing checked, and Tails reads ahead, in a goroutine, what the
// coming runs will need.
//
// It imports nothing of the project but semantics and source. Replaying
// archives at arbitrary times (libpcp's interpolation) is source/archive's.
package pcplog

// Package archive reads Performance Co-Pilot archives (format v2 and v3) in
// pure Go: the label of every file, the metadata of the .meta file
// (descriptors with all names, instance domains with deltas applied, labels,
// help text), the temporal index, and the records of every data volume in
// order, marks included, with exact values of every type. Plain and
// compressed files (.xz, .lzma, .bz2, .bz, .gz, .z, .zst) are read
// transparently, and an archive that pmlogger is still writing can be
// followed with Refresh.
//
// Iteration (Reader) is incremental and does not allocate per value: the
// Record and its slices are reused and string or aggregate values alias the
// reader's buffer until the next call to Next.
//
// Replay answers values at arbitrary times with libpcp's interpolation. It
// decodes every record it reads, ahead in one goroutine (see prefetch),
// except when its fetches are several records apart: plain volumes are
// then read sparsely, and a run of records whose last one holds every
// instance in the result is passed over with only its framing checked
// (lengths, trailers, time order, no <mark>); see Replay and
// Reader.skipRun. The goroutine then reads ahead what the coming runs will
// need, where their stride predicts them (see tails).
//
// Corrupt input gives a *FormatError naming the file and the byte offset;
// a truncated last record (a writer still at work) ends iteration cleanly.
//
// The label, the index entries, FormatError and the value encodings libpcp
// accepts are package pcplog's, the file format's package, which the rest
// of the format is to move into (issue 33).
package archive

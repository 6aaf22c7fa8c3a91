// Package archive replays Performance Co-Pilot archives as libpcp does:
// Replay answers values at arbitrary times with libpcp's interpolation
// over a timeline of archives, and Follow serves the newest values of an
// archive pmlogger is still writing. The file format (opening, metadata,
// index, volumes, records) is package pcplog's; this package reads it
// through pcplog's API only.
//
// A Replay's state is grouped by phase, each a type of its own: bounds
// (each metric's prior and next values), window (the records read and not
// yet applied), pacing (dense or sparse reading) and positioning (where to
// start reading for a time). What acts on one phase's state alone is a
// method of that phase; what moves the read position and updates the
// bounds from the records (roll, searchForward, updateBounds, position)
// crosses phases and is Replay's. Replay.Fetch is a short sequence of
// these calls.
//
// A Replay decodes every record it reads, ahead in one goroutine (see
// prefetch), except when its fetches are several records apart: plain
// volumes are then read sparsely, and a run of records whose last one
// holds every instance in the result is passed over with only its framing
// checked (lengths, trailers, time order, no <mark>); see Replay and
// pcplog.Reader.SkipRun. pcplog.Tails then reads ahead what the coming runs
// will need, where their stride predicts them.
package archive

// Package archive replays Performance Co-Pilot archives as libpcp does:
// Replay answers values at arbitrary times with libpcp's interpolation
// over a timeline of archives, and Follow serves the newest values of an
// archive pmlogger is still writing. The file format (opening, metadata,
// index, volumes, records) is package pcplog's; this package reads it
// through pcplog's API only.
//
// A Replay's state is held by its phases, each a type owning its state
// and the methods that change it: bounds (each metric's instances and
// their prior and next values, and how a record updates them: libpcp's
// update_bounds), window (the feed and the records read ahead of the
// position, and the record at the position), pacing (dense or sparse
// reading, and whether a run may be passed over) and positioning (the
// earliest record the first fetch's positioning applied). A phase is given
// what it reads of another as an argument. Replay keeps the timeline (the
// archives, their metrics and end) and the fetches' sequence: Fetch, and
// the passes it calls (roll and searchForward, in forward.go; position,
// with its backward search, in position.go), each a short sequence of
// phase calls. The answer (answer.go) and a metric's instances, their
// lifetimes and libpcp's order (instances.go) are read from the bounds.
//
// A Replay decodes every record it reads, ahead in one goroutine (see
// prefetch), except when its fetches are several records apart: plain
// volumes are then read sparsely, and a run of records whose last one
// holds every instance in the result is passed over with only its framing
// checked (lengths, trailers, time order, no <mark>); see Replay and
// pcplog.Reader.SkipRun. pcplog.Tails then reads ahead what the coming runs
// will need, where their stride predicts them.
package archive

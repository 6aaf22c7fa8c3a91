// Package readhooks is how the replay's tests reach what package pcplog's
// reader counts and what they may set of it, without pcplog exporting
// them: pcplog points these at its own variables when it is initialised.
// None of it changes what is read, only how.
package readhooks

import "sync/atomic"

// pcplog's variables (set by its init).
var (
	// the smallest read buffer of a volume (1 MiB by default)
	MinWindow *int
	// SkipRun waits for every read Tails was asked for, as if the
	// processors were idle
	TailsWaitAll *bool
	// the runs SkipRun found and did not pass over; the runs whose ends
	// Tails had read ahead and were used, or were predicted wrongly
	RunsRefused, TailsUsed, TailsMissed *atomic.Int64
)

// Counts returns, since the process started, the runs SkipRun found and
// did not pass over (refused), and the runs whose ends Tails had read
// ahead and were used, or were predicted wrongly (missed).
func Counts() (refused, used, missed int64) {
	return RunsRefused.Load(), TailsUsed.Load(), TailsMissed.Load()
}

// SetTailsWaitAll makes SkipRun wait for every read Tails was asked for,
// as if the processors were idle (what is read ahead is then used whenever
// predicted right); it returns the previous setting.
func SetTailsWaitAll(on bool) bool {
	old := *TailsWaitAll
	*TailsWaitAll = on
	return old
}

// SetMinWindow sets the smallest read buffer of a volume (tests make it
// small to have the reader compact and refill it) and returns the previous
// one. Readers opened later use it.
func SetMinWindow(n int) int {
	old := *MinWindow
	*MinWindow = n
	return old
}

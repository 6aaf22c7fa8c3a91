package pcplog

// What a replay's tests and benchmarks set and observe of the reading:
// none of it changes what is read, only how.

// ReadAheadCounts returns, since the process started, the runs SkipRun
// found and did not pass over (refused), and the runs whose ends Tails had
// read ahead and were used, or were predicted wrongly (missed).
func ReadAheadCounts() (refused, used, missed int64) {
	return runsRefused.Load(), tailsUsed.Load(), tailsMissed.Load()
}

// SetTailsWaitAll makes SkipRun wait for every read Tails was asked for,
// as if the processors were idle (for tests: what is read ahead is then
// used whenever predicted right); it returns the previous setting.
func SetTailsWaitAll(on bool) bool {
	old := tailsWaitAll
	tailsWaitAll = on
	return old
}

// SetMinWindow sets the smallest read buffer of a volume (1 MiB by
// default; tests make it small to have the reader compact and refill it)
// and returns the previous one. Readers opened later use it.
func SetMinWindow(n int) int {
	old := minWindow
	minWindow = n
	return old
}

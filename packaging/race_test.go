//go:build race

package packaging

// raceEnabled: the package test installs system-wide, once per CI run (the
// run without the race detector); it has no Go code of its own to race.
const raceEnabled = true

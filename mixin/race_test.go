//go:build race

package mixin

// raceEnabled: the end-to-end tests run processes, not Go code of their
// own; they run once per CI run, without the race detector.
const raceEnabled = true

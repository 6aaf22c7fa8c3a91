//go:build race

package pcplog

// raceEnabled: the tests run under the race detector (about 5x slower).
const raceEnabled = true

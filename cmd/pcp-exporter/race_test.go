//go:build race

package main

// raceEnabled: the tests run under the race detector (multi-minute
// end-to-end tests skip).
const raceEnabled = true

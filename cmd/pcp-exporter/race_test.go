//go:build race

package main

// raceEnabled: the tests run under the race detector (about 5x slower).
const raceEnabled = true

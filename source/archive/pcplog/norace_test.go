//go:build !race

package pcplog

const raceEnabled = false

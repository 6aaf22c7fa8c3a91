//go:build !race

package pmcd

const raceEnabled = false

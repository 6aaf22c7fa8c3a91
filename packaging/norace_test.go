//go:build !race

package packaging

const raceEnabled = false

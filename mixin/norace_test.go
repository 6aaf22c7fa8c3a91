//go:build !race

package mixin

const raceEnabled = false

//go:build !race

package frames

// raceEnabled: see race_on_test.go.
const raceEnabled = false

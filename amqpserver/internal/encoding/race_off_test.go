//go:build !race

package encoding

// raceEnabled: see race_on_test.go.
const raceEnabled = false

//go:build !race

package raftstore

// raceEnabled: see race_on_test.go.
const raceEnabled = false

//go:build !race

package clusterrpc

// raceEnabled: see race_on_test.go.
const raceEnabled = false

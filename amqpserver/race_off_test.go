//go:build !race

package amqpserver

// raceEnabled: see race_on_test.go.
const raceEnabled = false

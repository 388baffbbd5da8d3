//go:build race

package amqpserver

// raceEnabled: the race detector allows at most 8,128 live goroutines and
// slows everything, so measurements scale down under it.
const raceEnabled = true

//go:build race

package raftstore

// raceEnabled: the race detector makes single-goroutine tests of a data
// structure some thirty times slower (TestSetIndexAgreesWithAMap: 0.8 s
// without it, 27 s with) and has nothing to find in them, so they take
// fewer steps under it; `go test` without -race runs them in full.
const raceEnabled = true

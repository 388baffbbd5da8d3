//go:build race

package core

// raceEnabled reports a -race build, whose instrumentation allocates
// where a normal build does not: allocation counts are not checked then.
const raceEnabled = true

//go:build race

package frames

// raceEnabled: the race runtime pads small allocations, so byte counts
// measured under it overstate what the decoder allocates; the budget tests
// check them only without -race (make allocs runs them so).
const raceEnabled = true

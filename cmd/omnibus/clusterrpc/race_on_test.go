//go:build race

package clusterrpc

// raceEnabled: under the race detector sync.Pool drops a random share of
// what is put back (on purpose, to find misuse), so a pool's reuse cannot
// be measured; `make allocs` runs those tests without it.
const raceEnabled = true

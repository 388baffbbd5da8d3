package cli

import (
	"fmt"
	"os"
	"runtime"
	"strconv"

	"github.com/omnibusmq/omnibus/core/cgroups"
)

// Scheduler threads under a CPU budget. Go gives a process at least two
// Ps (GOMAXPROCS) however little CPU its cgroup allows, so a broker held
// below one core runs two threads that spend the period's budget in part
// of the period and then both wait, and spin looking for work between
// hand-offs. With one P it spends the budget on messages. A single broker
// held to 0.5 cores (cgroup v1 quota; omnibus-tools bench --scenario
// both, 2 connections, 1 KiB, 30 s after 15 s; runs alternated): at full
// load 31.5k, 37.4k, 39.3k sends + deliveries per second against 26.9k,
// 30.3k, 31.3k with two, CPU per send or delivery 12.8-14.2 µs against
// 16.8-19.2, end-to-end p99 42-55 ms against 56-62; at a fixed 6,000
// sends/s end-to-end p50 3.2 and 2.5 ms against 8.5 and 13.1, p99 41 and
// 39 against 49 and 55. Held to 0.25 cores: +25-31 % sends + deliveries,
// -21-23 % CPU per message (cmd/omnibus/README.md, "Under a CPU limit").
// At one core or more the runtime's choice stands.

// LimitProcs sets GOMAXPROCS to 1 when this process's cgroups allow it
// less than one core and GOMAXPROCS is not set in the environment, and
// returns what it found, for the start-up log.
func LimitProcs() string {
	cores, where := cgroups.CPULimit("/")
	_, envSet := os.LookupEnv("GOMAXPROCS")
	if procsFor(cores, envSet) == 1 {
		runtime.GOMAXPROCS(1)
		return fmt.Sprintf("1 (the cgroup allows %.2f cores: %s)", cores, where)
	}
	n := runtime.GOMAXPROCS(0)
	if envSet {
		return fmt.Sprintf("%d (GOMAXPROCS)", n)
	}
	return strconv.Itoa(n)
}

// procsFor returns the GOMAXPROCS to set for a cgroup CPU limit of cores
// (0: none), or 0 to leave the runtime's.
func procsFor(cores float64, envSet bool) int {
	if envSet || cores <= 0 || cores >= 1 {
		return 0
	}
	return 1
}

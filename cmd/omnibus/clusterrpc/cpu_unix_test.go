//go:build unix

package clusterrpc

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user and system) this process used so far:
// a routed benchmark's client and server both run in it, so its growth
// per operation is the routed path's CPU summed over both ends, whatever
// else the machine runs.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

//go:build !linux

package bench

import (
	"errors"
	"time"
)

// selfCPU is not measured outside Linux.
func selfCPU() time.Duration { return 0 }

// processCPU is not measured outside Linux.
func processCPU(int) (time.Duration, error) {
	return 0, errors.New("bench: process CPU time is read on Linux only")
}

// readMachineTimes is not measured outside Linux.
func readMachineTimes() (machineTimes, error) {
	return machineTimes{}, errors.New("bench: machine CPU times are read on Linux only")
}

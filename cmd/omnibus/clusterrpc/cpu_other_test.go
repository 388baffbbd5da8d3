//go:build !unix

package clusterrpc

import "time"

// processCPU is not measured here (cpu_unix_test.go).
func processCPU() time.Duration { return 0 }

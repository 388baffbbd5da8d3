package cgroups

import (
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// CPULimit returns the CPU time this process's cgroups allow it, in
// cores (0.5: half a second of CPU time per second), and the file that
// says so; 0 and "" when none limits it. v2 says it in cpu.max ("quota
// period", or "max period" for none), v1 in cpu.cfs_quota_us (-1 for
// none) beside cpu.cfs_period_us.
func CPULimit(root string) (cores float64, where string) {
	consider := func(c float64, file string) {
		if c > 0 && (cores == 0 || c < cores) {
			cores, where = c, "/"+file
		}
	}
	for _, f := range Files(root, "cpu.max", "cpu", "cpu.cfs_quota_us") {
		if path.Base(f) == "cpu.max" {
			consider(readCPUMax(filepath.Join(root, f)), f)
			continue
		}
		quota := readInt(filepath.Join(root, f))
		period := readInt(filepath.Join(root, path.Dir(f), "cpu.cfs_period_us"))
		if quota > 0 && period > 0 {
			consider(float64(quota)/float64(period), f)
		}
	}
	return cores, where
}

// readCPUMax reads a v2 cpu.max file: 0 for "max" or anything unreadable.
func readCPUMax(file string) float64 {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	fs := strings.Fields(string(data))
	if len(fs) != 2 {
		return 0
	}
	quota, err1 := strconv.ParseInt(fs[0], 10, 64)
	period, err2 := strconv.ParseInt(fs[1], 10, 64)
	if err1 != nil || err2 != nil || quota <= 0 || period <= 0 {
		return 0
	}
	return float64(quota) / float64(period)
}

// readInt reads a file holding one integer, 0 when it cannot.
func readInt(file string) int64 {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

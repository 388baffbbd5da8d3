package membudget

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/omnibusmq/omnibus/core/cgroups"
)

// DefaultShare is the part of the machine's memory (or its cgroup's) the
// default budget takes: peers may make omnibus hold half of it, the rest
// is the broker's own (indexes, body cache) and the system's.
const DefaultShare = 2

// fallbackMemory is assumed when neither /proc/meminfo nor a cgroup says
// how much memory there is (not Linux).
const fallbackMemory = 4 << 30

// DefaultLimit returns the default budget — the machine's memory, or its
// cgroup's limit when lower, divided by [DefaultShare] — and where that
// memory figure came from, for the start-up log.
func DefaultLimit() (int64, string) {
	mem, src := machineMemory("/")
	return mem / DefaultShare, src
}

// machineMemory returns the memory available to this process under root
// (a directory standing for /): the lowest of MemTotal and the memory
// limits of its cgroup and the cgroup's ancestors (v2 memory.max, v1
// memory.limit_in_bytes).
func machineMemory(root string) (int64, string) {
	mem, src := int64(0), ""
	if n := memTotal(filepath.Join(root, "proc/meminfo")); n > 0 {
		mem, src = n, "MemTotal"
	}
	if n, where := cgroupLimit(root); n > 0 && (mem == 0 || n < mem) {
		mem, src = n, where
	}
	if mem == 0 {
		return fallbackMemory, "assumed 4 GiB (no /proc/meminfo)"
	}
	return mem, src
}

// memTotal reads MemTotal from a meminfo file, 0 when it cannot.
func memTotal(file string) int64 {
	f, err := os.Open(file)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		fs := strings.Fields(rest)
		if len(fs) == 0 {
			return 0
		}
		n, err := strconv.ParseInt(fs[0], 10, 64)
		if err != nil {
			return 0
		}
		if len(fs) > 1 && strings.EqualFold(fs[1], "kB") {
			n <<= 10
		}
		return n
	}
	return 0
}

// cgroupLimit returns the lowest memory limit of this process's cgroup
// and its ancestors, v2 or v1, and the file it came from; 0 when there
// is none.
func cgroupLimit(root string) (int64, string) {
	best, where := int64(0), ""
	consider := func(file string) {
		n := readLimit(filepath.Join(root, file))
		if n > 0 && (best == 0 || n < best) {
			best, where = n, "/"+file
		}
	}
	for _, f := range cgroups.Files(root, "memory.max", "memory", "memory.limit_in_bytes") {
		consider(f)
	}
	return best, where
}

// readLimit reads a cgroup memory limit file: 0 for "max", the v1
// "unlimited" value, or anything unreadable.
func readLimit(file string) int64 {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	s := strings.TrimSpace(string(data))
	if s == "max" {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n >= 1<<60 {
		return 0
	}
	return n
}

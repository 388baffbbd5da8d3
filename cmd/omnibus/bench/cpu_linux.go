package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// userHZ is the unit of /proc/PID/stat's CPU times (USER_HZ, 100 on
// every Linux architecture Go supports).
const userHZ = 100

// selfCPU is the user + system CPU time this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// processCPU is the user + system CPU time process pid has used, its
// threads included.
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces;
	// utime and stime are fields 14 and 15, the 12th and 13th after it.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("bench: malformed /proc stat")
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 13 {
		return 0, errors.New("bench: short /proc stat")
	}
	utime, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	stime, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("bench: malformed /proc stat times")
	}
	return time.Duration(utime+stime) * time.Second / userHZ, nil
}

// readMachineTimes reads the first line of /proc/stat: "cpu" and the
// machine's user, nice, system, idle, iowait, irq, softirq and steal
// times in USER_HZ (guest time is already inside user and nice).
func readMachineTimes() (machineTimes, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineTimes{}, err
	}
	return parseMachineTimes(b)
}

func parseMachineTimes(stat []byte) (machineTimes, error) {
	line, _, _ := bytes.Cut(stat, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 9 || string(f[0]) != "cpu" {
		return machineTimes{}, errors.New("bench: malformed /proc/stat")
	}
	var v [8]int64
	for i := range v {
		n, err := strconv.ParseInt(string(f[i+1]), 10, 64)
		if err != nil {
			return machineTimes{}, errors.New("bench: malformed /proc/stat times")
		}
		v[i] = n
	}
	tick := func(n int64) time.Duration { return time.Duration(n) * time.Second / userHZ }
	user, nice, system, idle, iowait, irq, softirq, steal := v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]
	return machineTimes{
		busy:  tick(user + nice + system + irq + softirq),
		idle:  tick(idle + iowait),
		steal: tick(steal),
	}, nil
}

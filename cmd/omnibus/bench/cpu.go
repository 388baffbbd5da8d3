package bench

import "time"

// CPU accounting. On a machine the load generator shares with the broker,
// the rate is bounded by the CPU both spend per message, so a run reports
// the client's CPU time and, given --broker-pid, the broker's, over the
// same span: from the first timed send (after any pre-fill) to the end of
// the drain.

// cpuSample is the CPU time used so far by this process and by the broker
// (brokerOK false: no broker PID, or its time could not be read), and the
// machine's CPU time counters (machineOK false: not readable).
type cpuSample struct {
	client, broker time.Duration
	brokerOK       bool
	machine        machineTimes
	machineOK      bool
}

// machineTimes are the machine's cumulative CPU times, all CPUs together:
// busy (user, system, interrupts), idle (idle and I/O wait), and stolen
// by the hypervisor for other guests while this one had work. A virtual
// machine's neighbours show up as steal: a run with much of it measured a
// slower machine than the one named in its table.
type machineTimes struct {
	busy, idle, steal time.Duration
}

// machineUse is what a run's machine did between two samples, in percent
// of all its CPU time: busy and stolen (both 0 when not measured).
func machineUse(a, b cpuSample) (busyPct, stealPct float64) {
	if !a.machineOK || !b.machineOK {
		return 0, 0
	}
	busy := b.machine.busy - a.machine.busy
	steal := b.machine.steal - a.machine.steal
	total := busy + steal + b.machine.idle - a.machine.idle
	if total <= 0 {
		return 0, 0
	}
	return 100 * float64(busy) / float64(total), 100 * float64(steal) / float64(total)
}

// sampleCPU reads the CPU times of this process, of the machine and, if
// brokerPID > 0, of the broker.
func sampleCPU(brokerPID int) cpuSample {
	s := cpuSample{client: selfCPU()}
	if m, err := readMachineTimes(); err == nil {
		s.machine, s.machineOK = m, true
	}
	if brokerPID > 0 {
		if d, err := processCPU(brokerPID); err == nil {
			s.broker, s.brokerOK = d, true
		}
	}
	return s
}

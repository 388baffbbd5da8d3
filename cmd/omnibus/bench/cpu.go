package bench

import "time"

// CPU accounting. On a machine the load generator shares with the broker,
// the rate is bounded by the CPU both spend per message, so a run reports
// the client's CPU time and, given --broker-pid, the broker's, over the
// same span: from the first timed send (after any pre-fill) to the end of
// the drain.

// cpuSample is the CPU time used so far by this process and by the broker
// (brokerOK false: no broker PID, or its time could not be read).
type cpuSample struct {
	client, broker time.Duration
	brokerOK       bool
}

func sampleCPU(brokerPID int) cpuSample {
	s := cpuSample{client: selfCPU()}
	if brokerPID > 0 {
		if d, err := processCPU(brokerPID); err == nil {
			s.broker, s.brokerOK = d, true
		}
	}
	return s
}

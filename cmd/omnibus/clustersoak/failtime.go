package clustersoak

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// A failover's time runs from the moment the fault took effect (the
// killed process reaped, the link down, the stopped process seen
// stopped) to the first send acknowledged by the new leader. Which
// acknowledgements are the new leader's: those that arrived at or after
// the moment it says its Session began (raftstore.Status.ServingSince).
// No other node serves from then on (the old one is still down, and the
// lease keeps any other from leading), and the new leader acknowledged
// nothing before it. An acknowledgement that arrives after the fault
// took effect but before then is someone else's: the deposed leader's,
// written just before it went down, or an intermediate leader's; it does
// not count.

// maxAckTimes bounds the acknowledgements recorded during one failover.
// Few arrive before the new leader serves, and the soak stops recording
// as soon as it has found the new leader's first.
const maxAckTimes = 1 << 16

// ackTimes records when sends were acknowledged, while a failover is
// being measured.
type ackTimes struct {
	mu    sync.Mutex // guards the fields below
	on    bool
	times []int64 // unix nanos, as the senders saw them
}

// start records from now on, forgetting the previous failover's.
func (a *ackTimes) start() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.on, a.times = true, a.times[:0]
}

// stop ends the recording.
func (a *ackTimes) stop() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.on = false
}

// add records an acknowledgement received at at.
func (a *ackTimes) add(at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.on && len(a.times) < maxAckTimes {
		a.times = append(a.times, at.UnixNano())
	}
}

// firstAck is the time from effect to the first acknowledgement the new
// leader gave, it having served since since; ok is false while there is
// none yet.
func (a *ackTimes) firstAck(effect, since time.Time) (d time.Duration, ok bool) {
	from := max(effect.UnixNano(), since.UnixNano())
	a.mu.Lock()
	defer a.mu.Unlock()
	first := int64(0)
	for _, t := range a.times {
		if t >= from && (first == 0 || t < first) {
			first = t
		}
	}
	if first == 0 {
		return 0, false
	}
	return time.Duration(first - effect.UnixNano()), true
}

// waitStopped waits (up to a second) until the kernel shows process pid
// stopped, after a SIGSTOP.
func waitStopped(pid int) error {
	deadline := time.Now().Add(time.Second)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return err
		}
		// pid (comm) state ...: comm may hold spaces and parentheses.
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) && (b[i+2] == 'T' || b[i+2] == 't') {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d not stopped a second after SIGSTOP", pid)
		}
		time.Sleep(time.Millisecond)
	}
}

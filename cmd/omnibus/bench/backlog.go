package bench

import (
	"context"
	"sync"
	"sync/atomic"
)

// backlogGate holds the senders of a send-and-receive run back while
// Config.MaxBacklog of their messages are sent and not yet received. Left
// alone, both sides run flat out and the queue keeps whatever backlog the
// run's first seconds left it: in the cluster benchmarks one run's
// messages lived 0.1 s from send to delivery and the next one's 2 s, with
// the same code, and a message living longer than a follower's hold
// costs the followers an apply the short-lived ones do not
// (storage/raftstore RESULTS.md). With the gate the queue stays near
// empty, as behind consumers that keep up, and runs compare.
//
// The bound is approximate: senders that pass the check together may
// overshoot it by how many they are.
type backlogGate struct {
	max      int64
	sent     atomic.Int64 // sends let through
	received atomic.Int64 // this run's messages delivered
	mu       sync.Mutex
	freed    chan struct{} // closed by the next delivery; nil: nobody waits
}

// newBacklogGate returns a gate for max messages in the queue; nil (no
// gate: every method passes) for max 0.
func newBacklogGate(max int64) *backlogGate {
	if max <= 0 {
		return nil
	}
	return &backlogGate{max: max}
}

// admit waits until the backlog is under the bound and counts one send;
// false when ctx ended first.
func (g *backlogGate) admit(ctx context.Context) bool {
	if g == nil {
		return true
	}
	for {
		if g.sent.Load()-g.received.Load() < g.max {
			g.sent.Add(1)
			return true
		}
		g.mu.Lock()
		if g.sent.Load()-g.received.Load() < g.max {
			g.mu.Unlock()
			continue
		}
		if g.freed == nil {
			g.freed = make(chan struct{})
		}
		freed := g.freed
		g.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return false
		}
	}
}

// delivered counts one of the run's messages received and wakes the
// senders waiting for room.
func (g *backlogGate) delivered() {
	if g == nil {
		return
	}
	g.received.Add(1)
	g.mu.Lock()
	if g.freed != nil {
		close(g.freed)
		g.freed = nil
	}
	g.mu.Unlock()
}

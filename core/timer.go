package core

import (
	"sync"
	"time"

	"github.com/omnibusmq/omnibus/core/clock"
)

// brokerTimer multiplexes every queue's next due time (lock expiry,
// scheduled activation, session lock expiry) onto one clock timer. Each
// queue registers only its earliest due time, so the heap holds at most a
// few entries per queue however many locks are outstanding.
type brokerTimer struct {
	clk clock.Clock

	mu      sync.Mutex // guards the fields below
	h       []wakeItem
	t       clock.Timer
	armedAt int64 // due time of t, 0 when unarmed
	closed  bool
}

type wakeItem struct {
	at int64
	q  *queue
}

func (w wakeItem) dueAt() int64 { return w.at }

// wake asks for q.tick to run at or after at (unix nanos).
func (bt *brokerTimer) wake(q *queue, at int64) {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	if bt.closed {
		return
	}
	pushDue(&bt.h, wakeItem{at: at, q: q})
	bt.armLocked()
}

func (bt *brokerTimer) armLocked() {
	if len(bt.h) == 0 || bt.closed {
		return
	}
	next := bt.h[0].at
	if bt.armedAt != 0 && bt.armedAt <= next {
		return
	}
	if bt.t != nil {
		bt.t.Stop()
	}
	bt.armedAt = next
	d := time.Duration(next - bt.clk.Now().UnixNano())
	if d < 0 {
		d = 0
	}
	bt.t = bt.clk.AfterFunc(d, bt.fire)
}

// fire runs every due queue's tick, then re-arms for the next.
func (bt *brokerTimer) fire() {
	now := bt.clk.Now().UnixNano()
	bt.mu.Lock()
	bt.armedAt = 0
	bt.t = nil
	var due []*queue
	seen := make(map[*queue]bool)
	for len(bt.h) > 0 && bt.h[0].at <= now {
		it := popDue(&bt.h)
		if !seen[it.q] {
			seen[it.q] = true
			due = append(due, it.q)
		}
	}
	bt.armLocked()
	bt.mu.Unlock()
	for _, q := range due {
		q.tick(now)
	}
}

func (bt *brokerTimer) close() {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	bt.closed = true
	if bt.t != nil {
		bt.t.Stop()
	}
	bt.h = nil
}

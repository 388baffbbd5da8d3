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

// wake asks for q.tick to run at or after at (unix nanos).
func (bt *brokerTimer) wake(q *queue, at int64) {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	if bt.closed {
		return
	}
	bt.h = append(bt.h, wakeItem{at: at, q: q})
	for j := len(bt.h) - 1; j > 0; {
		i := (j - 1) / 2
		if bt.h[i].at <= bt.h[j].at {
			break
		}
		bt.h[i], bt.h[j] = bt.h[j], bt.h[i]
		j = i
	}
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
		it := bt.popLocked()
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

func (bt *brokerTimer) popLocked() wakeItem {
	s := bt.h
	it := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	for i := 0; ; {
		j := 2*i + 1
		if j >= n {
			break
		}
		if r := j + 1; r < n && s[r].at < s[j].at {
			j = r
		}
		if s[i].at <= s[j].at {
			break
		}
		s[i], s[j] = s[j], s[i]
		i = j
	}
	bt.h = s
	return it
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

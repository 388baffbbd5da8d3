// Package gopool runs short tasks on goroutines that stay for the next
// task.
//
// A fresh goroutine starts with a small stack, and a task that commits to
// Pebble needs a deep one: growing and copying the stack on every send or
// completion cost about 6 % of the broker's CPU. A pooled goroutine grows
// its stack once. Callers that must wait for their tasks count them
// themselves (a sync.WaitGroup); the pool only keeps goroutines.
package gopool

import (
	"sync"
	"sync/atomic"
)

// Pool keeps up to a fixed number of idle goroutines. The zero value is
// not usable; call New.
type Pool struct {
	maxIdle int
	spawned atomic.Int64 // goroutines started, ever

	mu     sync.Mutex
	idle   []chan func() // the idle goroutines' inboxes, the latest last
	closed bool
}

// New returns a pool that keeps at most maxIdle goroutines waiting for
// work; beyond that, a goroutine whose task is done exits.
func New(maxIdle int) *Pool {
	return &Pool{maxIdle: maxIdle}
}

// Go runs f on the goroutine of the pool that became idle last (its stack
// is the warmest), or on a new one when none is idle. It never waits for
// a goroutine to become free, so tasks may block on each other without
// deadlock. After Close, f still runs, on a goroutine that exits when f
// returns.
func (p *Pool) Go(f func()) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		inbox := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		inbox <- f // buffered: the goroutine takes it whenever it gets there
		return
	}
	p.mu.Unlock()
	p.spawned.Add(1)
	go p.worker(make(chan func(), 1), f)
}

// Close lets the idle goroutines exit, and makes every later one exit once
// its task is done. Tasks already running are not waited for.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	for _, inbox := range p.idle {
		close(inbox)
	}
	p.idle = nil
}

// Idle reports how many goroutines are waiting for work.
func (p *Pool) Idle() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

func (p *Pool) worker(inbox chan func(), f func()) {
	for {
		f()
		f = nil // let the task's memory go while idle
		p.mu.Lock()
		if p.closed || len(p.idle) >= p.maxIdle {
			p.mu.Unlock()
			return
		}
		p.idle = append(p.idle, inbox)
		p.mu.Unlock()
		var ok bool
		if f, ok = <-inbox; !ok {
			return // closed
		}
	}
}

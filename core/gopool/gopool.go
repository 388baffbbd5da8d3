// Package gopool runs short tasks on goroutines that stay for the next
// task.
//
// A fresh goroutine starts with a small stack, and a task that commits to
// Pebble needs a deep one: growing and copying the stack on every send or
// completion cost about 6 % of the broker's CPU. A pooled goroutine grows
// its stack once. Callers that must wait for their tasks count them
// themselves (a sync.WaitGroup); the pool only keeps goroutines.
package gopool

import "sync/atomic"

// Pool keeps up to a fixed number of idle goroutines. The zero value is
// not usable; call New.
type Pool struct {
	work    chan func() // unbuffered: a send succeeds only if a goroutine is idle
	quit    chan struct{}
	maxIdle int32
	idle    atomic.Int32
	spawned atomic.Int64 // goroutines started, ever
	closed  atomic.Bool
}

// New returns a pool that keeps at most maxIdle goroutines waiting for
// work; beyond that, a goroutine whose task is done exits.
func New(maxIdle int) *Pool {
	return &Pool{work: make(chan func()), quit: make(chan struct{}), maxIdle: int32(maxIdle)}
}

// Go runs f on an idle goroutine of the pool, or on a new one when none
// is idle. It never waits for a goroutine to become free, so tasks may
// block on each other without deadlock. After Close, f still runs, on a
// goroutine that exits when f returns.
func (p *Pool) Go(f func()) {
	select {
	case p.work <- f:
	default:
		p.spawned.Add(1)
		go p.worker(f)
	}
}

// Close lets the idle goroutines exit, and makes every later one exit once
// its task is done. Tasks already running are not waited for.
func (p *Pool) Close() {
	if p.closed.CompareAndSwap(false, true) {
		close(p.quit)
	}
}

// Idle reports how many goroutines are waiting for work.
func (p *Pool) Idle() int { return int(p.idle.Load()) }

func (p *Pool) worker(f func()) {
	for {
		f()
		f = nil // let the task's memory go while idle
		if p.closed.Load() {
			return
		}
		if p.idle.Add(1) > p.maxIdle {
			p.idle.Add(-1)
			return
		}
		select {
		case f = <-p.work:
			p.idle.Add(-1)
		case <-p.quit:
			p.idle.Add(-1)
			return
		}
	}
}

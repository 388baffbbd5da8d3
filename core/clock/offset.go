package clock

import (
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// ErrBackwards is returned by [Offset.Advance] for a negative duration:
// a namespace's clock only moves forward.
var ErrBackwards = errors.New("clock: a clock cannot be moved backwards")

// Offset is a clock running a fixed distance ahead of another, which
// [Offset.Advance] can widen at run time. Each namespace of omnibus may
// run on one (the test clock, core/namespace): moving it forward makes
// everything its broker has scheduled through AfterFunc and now due run
// at once (lock expiries, scheduled messages, TTLs, auto-delete), and
// what is not due yet is re-armed for its new, nearer time.
//
// Offset keeps its pending timers, so that Advance can find them; a timer
// leaves the set when it runs or is stopped. It is safe for concurrent
// use.
type Offset struct {
	base   Clock
	offset atomic.Int64 // nanoseconds ahead of base

	mu     sync.Mutex // guards timers and every offsetTimer's base and done
	timers map[*offsetTimer]struct{}
}

type offsetTimer struct {
	c    *Offset
	at   time.Time // due, on the offset clock
	f    func()
	base Timer // the base clock's timer for at; replaced by Advance
	done bool  // ran or stopped
}

// NewOffset returns a clock ahead of base by ahead (not negative).
func NewOffset(base Clock, ahead time.Duration) *Offset {
	c := &Offset{base: base, timers: make(map[*offsetTimer]struct{})}
	c.offset.Store(int64(max(ahead, 0)))
	return c
}

// Now returns the base clock's time plus the offset.
func (c *Offset) Now() time.Time {
	return c.base.Now().Add(time.Duration(c.offset.Load()))
}

// Ahead returns how far the clock is ahead of its base.
func (c *Offset) Ahead() time.Duration { return time.Duration(c.offset.Load()) }

// AfterFunc calls f once the clock has passed now+d: when the base clock
// has moved d, or sooner when Advance moves the clock past it.
func (c *Offset) AfterFunc(d time.Duration, f func()) Timer {
	t := &offsetTimer{c: c, at: c.Now().Add(d), f: f}
	c.mu.Lock()
	c.timers[t] = struct{}{}
	t.base = c.base.AfterFunc(d, t.fire)
	c.mu.Unlock()
	return t
}

// fire runs t's function when its base timer goes off, unless Advance or
// Stop got there first.
func (t *offsetTimer) fire() {
	c := t.c
	c.mu.Lock()
	if t.done {
		c.mu.Unlock()
		return
	}
	if wait := t.at.Sub(c.Now()); wait > 0 { // a base clock that fired early
		t.base = c.base.AfterFunc(wait, t.fire)
		c.mu.Unlock()
		return
	}
	t.done = true
	delete(c.timers, t)
	c.mu.Unlock()
	t.f()
}

// Stop cancels the call if it has not happened yet and reports whether
// it did so.
func (t *offsetTimer) Stop() bool {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.done {
		return false
	}
	t.done = true
	delete(c.timers, t)
	t.base.Stop()
	return true
}

// Advance moves the clock forward by d and runs, in the caller's
// goroutine and in time order, every timer that falls due; the others
// are re-armed for their nearer due time. A negative d changes nothing
// and returns [ErrBackwards].
func (c *Offset) Advance(d time.Duration) error {
	if d < 0 {
		return ErrBackwards
	}
	c.mu.Lock()
	c.offset.Add(int64(d))
	now := c.Now()
	var due []*offsetTimer
	for t := range c.timers {
		t.base.Stop()
		if t.at.After(now) {
			t.base = c.base.AfterFunc(t.at.Sub(now), t.fire)
			continue
		}
		t.done = true
		delete(c.timers, t)
		due = append(due, t)
	}
	c.mu.Unlock()
	sort.Slice(due, func(i, j int) bool { return due[i].at.Before(due[j].at) })
	for _, t := range due {
		t.f()
	}
	return nil
}

// Pending returns the number of timers that have neither run nor been
// stopped.
func (c *Offset) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

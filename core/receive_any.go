package core

import (
	"context"
	"sync/atomic"
)

// Receiving from a partitioned entity: from whichever of its partitions
// has messages, as Service Bus's front end asks every partition and
// hands out what comes first.
//
// A receive first takes what is available, visiting the partitions from
// a different one each time (so that no partition starves another) and
// filling its batch from as many as it needs. When none has anything it
// waits on all of them with one waiter. Each queue checks for available
// messages and registers the waiter under its own mutex, so nothing sent
// meanwhile is missed; the waiter's claim flag makes sure exactly one
// queue serves it (or the receive's end cancels it): the others drop it
// when they meet it.

// receiveAny is Receive over qs, the queues of e's partitions.
func (e *entity) receiveAny(ctx context.Context, qs []*queue, opts ReceiveOptions) ([]*Message, error) {
	for {
		out, again, err := e.receiveAnyOnce(ctx, qs, opts)
		if !again {
			return out, err
		}
	}
}

// receiveAnyOnce takes or waits once; again reports that what it got is
// gone (expired, or quarantined) and nothing is left to return yet.
func (e *entity) receiveAnyOnce(ctx context.Context, qs []*queue, opts ReceiveOptions) (out []*Message, again bool, err error) {
	n := len(qs)
	start := int(e.nextRecv.Add(1) % uint32(n))
	b := qs[0].b
	now := b.Now()

	// Take what is there, from as many partitions as the batch needs (one
	// only when the batch is bounded in bytes: the first message a queue
	// hands out is taken whatever its size).
	var grabs []grab
	left := opts.Max
	for i := 0; i < n && left > 0; i++ {
		q := qs[(start+i)%n]
		q.mu.Lock()
		if q.mu.closed {
			err := q.closedErrLocked()
			q.mu.Unlock()
			return finishGrabs(grabs, opts.Mode, err)
		}
		got := q.takeLocked(now, opts.Mode, left, opts.MaxBytes, nil)
		q.mu.Unlock()
		if len(got) == 0 {
			continue
		}
		q.kickExpiry()
		grabs = append(grabs, grab{q, got})
		left -= len(got)
		if opts.MaxBytes > 0 {
			break
		}
	}
	if len(grabs) > 0 {
		for i, g := range grabs {
			msgs, err := g.q.finish(g.got, opts.Mode)
			if err != nil && len(out) == 0 {
				// What the other partitions gave goes back untouched: a
				// lock taken but never finished would never expire
				// (lock.go).
				for _, g := range grabs[i+1:] {
					g.q.untake(g.got, opts.Mode)
				}
				return nil, false, err
			}
			out = append(out, msgs...)
		}
		return out, len(out) == 0, nil
	}

	// Nothing anywhere: wait on every partition with one waiter.
	w := &waiter{mode: opts.Mode, max: opts.Max, maxBytes: opts.MaxBytes, ch: make(chan []taken, 1), claim: new(atomic.Bool)}
	var on []*queue
	var direct []taken
	var from *queue
	for i := 0; i < n && !w.claim.Load(); i++ {
		q := qs[(start+i)%n]
		q.mu.Lock()
		if q.mu.closed {
			err := q.closedErrLocked()
			q.mu.Unlock()
			if w.claim.CompareAndSwap(false, true) {
				dropWaiter(w, on)
				return nil, false, err
			}
			break // served meanwhile: take what it got below
		}
		if len(q.mu.avail) > 0 {
			// Arrived since the first pass.
			if w.claim.CompareAndSwap(false, true) {
				direct = q.takeLocked(now, opts.Mode, opts.Max, opts.MaxBytes, nil)
				from = q
			}
			q.mu.Unlock()
			break
		}
		q.mu.waiters = append(q.mu.waiters, w)
		on = append(on, q)
		q.mu.Unlock()
		q.kickExpiry()
	}
	if from != nil {
		dropWaiter(w, on)
		out, err = from.finish(direct, opts.Mode)
		return out, err == nil && len(out) == 0, err
	}

	select {
	case got, ok := <-w.ch:
		dropWaiter(w, on)
		if !ok {
			return nil, false, closedErrOf(qs)
		}
		if len(got) == 0 {
			return nil, ctx.Err() == nil, nil
		}
		out, err = w.from.finish(got, opts.Mode)
		return out, err == nil && len(out) == 0 && ctx.Err() == nil, err
	case <-ctx.Done():
	}
	if !w.claim.CompareAndSwap(false, true) {
		// Served concurrently with the cancellation: give the messages
		// back untouched (no delivery counted).
		if got, ok := <-w.ch; ok && len(got) > 0 {
			w.from.untake(got, opts.Mode)
		}
	}
	dropWaiter(w, on)
	if ctx.Err() == context.DeadlineExceeded {
		return nil, false, nil
	}
	return nil, false, ctx.Err()
}

// dropWaiter takes w off the queues it waits on.
func dropWaiter(w *waiter, on []*queue) {
	for _, q := range on {
		q.mu.Lock()
		q.removeWaiterLocked(w)
		q.mu.Unlock()
	}
}

// grab is what a receive took from one queue.
type grab struct {
	q   *queue
	got []taken
}

// finishGrabs hands out what a receive took before it met err: the
// messages, if any, else the error.
func finishGrabs(grabs []grab, mode ReceiveMode, err error) ([]*Message, bool, error) {
	var out []*Message
	for _, g := range grabs {
		msgs, ferr := g.q.finish(g.got, mode)
		if ferr == nil {
			out = append(out, msgs...)
		}
	}
	if len(out) > 0 {
		return out, false, nil
	}
	return nil, false, err
}

// acceptAny is AcceptSession of the next available session over qs, the
// queues of e's partitions: the first partition with a session ready
// gives it, or the first that gets one while the call waits.
func (e *entity) acceptAny(ctx context.Context, qs []*queue) (*SessionLock, error) {
	n := len(qs)
	start := int(e.nextRecv.Add(1) % uint32(n))
	now := qs[0].b.Now()
	timeout := func() error {
		return errf(CodeTimeout, "No session available to accept on '%s' within the timeout.", qs[0].path)
	}
	w := &acceptWaiter{ch: make(chan *session, 1), claim: new(atomic.Bool)}
	var on []*queue
	var sl *SessionLock
	for i := 0; i < n && !w.claim.Load(); i++ {
		q := qs[(start+i)%n]
		q.mu.Lock()
		if q.mu.closed {
			err := q.closedErrLocked()
			q.mu.Unlock()
			if w.claim.CompareAndSwap(false, true) {
				dropAccepter(w, on)
				return nil, err
			}
			break
		}
		if len(q.mu.sessions.ready) > 0 {
			if w.claim.CompareAndSwap(false, true) {
				sl = q.lockSessionLocked(q.mu.sessions.ready[0], now)
			}
			q.mu.Unlock()
			break
		}
		q.mu.sessions.waiters = append(q.mu.sessions.waiters, w)
		on = append(on, q)
		q.mu.Unlock()
	}
	if sl != nil {
		dropAccepter(w, on)
		return sl, nil
	}
	select {
	case s := <-w.ch:
		dropAccepter(w, on)
		if s == nil {
			return nil, closedErrOf(qs)
		}
		w.from.mu.Lock()
		defer w.from.mu.Unlock()
		return s.sessionLock(), nil
	case <-ctx.Done():
	}
	if !w.claim.CompareAndSwap(false, true) {
		// Served while timing out: give the session back.
		if s := <-w.ch; s != nil {
			w.from.mu.Lock()
			w.from.unlockSessionLocked(s, false, w.from.b.Now())
			w.from.mu.Unlock()
		}
	}
	dropAccepter(w, on)
	return nil, timeout()
}

// dropAccepter takes w off the queues it waits on.
func dropAccepter(w *acceptWaiter, on []*queue) {
	for _, q := range on {
		q.mu.Lock()
		x := &q.mu.sessions
		for i, y := range x.waiters {
			if y == w {
				x.waiters = append(x.waiters[:i], x.waiters[i+1:]...)
				break
			}
		}
		q.mu.Unlock()
	}
}

// closedErrOf is closedErr of the partition whose closing woke a wait on
// qs (the first closed one: a deletion closes them all, deleted).
func closedErrOf(qs []*queue) error {
	for _, q := range qs {
		q.mu.Lock()
		closed := q.mu.closed
		var err error
		if closed {
			err = q.closedErrLocked()
		}
		q.mu.Unlock()
		if closed {
			return err
		}
	}
	return entityNotFound(qs[0].path)
}

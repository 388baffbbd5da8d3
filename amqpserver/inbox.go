package amqpserver

import "sync"

// inbox holds the work helper goroutines post to the connection goroutine
// (results of sends, receives, settlements, management calls). Posting
// appends under a mutex and wakes run only when the inbox was empty, so a
// burst of completions costs run one wake-up, and a helper never waits
// for run.
type inbox struct {
	mu     sync.Mutex
	fs     []func()
	spare  []func()      // the slice run emptied last, reused
	closed bool          // run has stopped: post refuses
	wake   chan struct{} // (cap 1) fs became non-empty
}

func newInbox() inbox { return inbox{wake: make(chan struct{}, 1)} }

// post queues f to run on the connection goroutine. It returns false (and
// drops f) once the connection has stopped taking work.
func (c *conn) post(f func()) bool {
	in := &c.in
	in.mu.Lock()
	if in.closed {
		in.mu.Unlock()
		return false
	}
	first := len(in.fs) == 0
	in.fs = append(in.fs, f)
	in.mu.Unlock()
	if first {
		signal(in.wake)
	}
	return true
}

// postHere is post for the goroutines that report the results of the
// connection's broker calls (sends, completions, receives): when no pass
// is running it makes one on the calling goroutine (the work posted so
// far and f, in order, then the end of the pass) instead of waking run, so an
// answer reaches the writer with one goroutine switch fewer. Otherwise
// it posts f for the pass that is running, or for run. The caller must
// hold no lock a pass may take (core's, the memory budget's): it is
// called from helper goroutines only.
func (c *conn) postHere(f func()) bool {
	if !c.mu.TryLock() {
		return c.post(f)
	}
	defer c.mu.Unlock()
	if c.stopped {
		return c.post(f) // run has returned: closeInbox takes it, or post refuses
	}
	in := &c.in
	in.mu.Lock()
	in.fs = append(in.fs, f)
	in.mu.Unlock()
	c.runPosted()
	c.endPass()
	c.tellRun()
	return true
}

// runPosted runs the work posted so far, in posting order.
func (c *conn) runPosted() {
	in := &c.in
	in.mu.Lock()
	fs := in.fs
	in.fs, in.spare = in.spare, nil
	in.mu.Unlock()
	for i, f := range fs {
		fs[i] = nil
		f()
	}
	in.mu.Lock()
	if in.spare == nil {
		in.spare = fs[:0]
	}
	in.mu.Unlock()
}

// runReadyPosted runs the posted work if a wake-up is pending, without
// waiting, and reports whether it was.
func (c *conn) runReadyPosted() bool {
	select {
	case <-c.in.wake:
		c.runPosted()
		return true
	default:
		return false
	}
}

// closeInbox makes post refuse further work and runs what was posted
// before, so that its owners see their links released (and, for example,
// give back messages a receive returned) instead of it being lost.
func (c *conn) closeInbox() {
	c.in.mu.Lock()
	c.in.closed = true
	c.in.mu.Unlock()
	c.runPosted()
}

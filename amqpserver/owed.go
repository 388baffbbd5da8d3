package amqpserver

// Frames are handled in the order they arrived (doc.go). Sends and
// settlements go to the broker in helper goroutines, so a detach, end or
// close that follows them in the same burst would otherwise overtake
// them: the detach of a session receiver releases the session lock, and
// completions that reach the broker after that fail and the messages come
// back. So the work whose answer the peer is owed carries a ticket (owe),
// and what a detach, end or close does to the broker and its answer wait
// until every ticket issued before it is paid (afterOwed).

// owedWait is work waiting for the tickets below upTo.
type owedWait struct {
	upTo uint64
	f    func()
}

// owe issues a ticket for work whose answer the peer is owed; the work
// pays it when its answer has been written (or dropped).
func (c *conn) owe() uint64 {
	t := c.nextTicket
	c.nextTicket++
	if c.owed == nil {
		c.owed = make(map[uint64]struct{})
	}
	c.owed[t] = struct{}{}
	return t
}

// paid settles ticket t and runs the waits it held back.
func (c *conn) paid(t uint64) {
	delete(c.owed, t)
	if len(c.waits) == 0 {
		return
	}
	low := c.nextTicket
	for o := range c.owed {
		low = min(low, o)
	}
	n := 0
	for n < len(c.waits) && c.waits[n].upTo <= low {
		n++
	}
	ready := c.waits[:n]
	c.waits = c.waits[n:]
	for _, w := range ready {
		w.f()
	}
}

// afterOwed runs f once every ticket issued so far is paid: at once when
// none is outstanding. Functions run in the order they were given.
func (c *conn) afterOwed(f func()) {
	if len(c.owed) == 0 && len(c.waits) == 0 {
		f()
		return
	}
	c.waits = append(c.waits, owedWait{upTo: c.nextTicket, f: f})
}

// runWaits runs every wait still held back. serve calls it once run and
// every helper have returned, so that tickets whose answers could no
// longer be posted do not keep a session lock held.
func (c *conn) runWaits() {
	waits := c.waits
	c.waits = nil
	for _, w := range waits {
		w.f()
	}
}

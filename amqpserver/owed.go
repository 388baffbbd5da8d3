package amqpserver

// Frames are handled in the order they arrived (doc.go). Sends and
// settlements go to the broker in helper goroutines, so a detach, end or
// close that follows them in the same burst would otherwise overtake
// them: the detach of a session receiver releases the session lock, and
// completions that reach the broker after that fail and the messages come
// back. So the work whose answer the peer is owed carries a ticket (owe),
// and what a detach, end or close does to the broker and its answer wait
// until every ticket issued before it is paid (afterOwed).

// The answers a wait is held back for may have been queued as
// acknowledgements in the same pass (queueAck), to be written at its end:
// they are written before the wait runs, so that a client reads them
// before the detach, end or close that follows them.

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

// paid settles ticket t and runs the waits it held back, in order. A
// wait may pay a ticket of its own at once (a rollback): that nested call
// only records it, and this loop goes on in order.
func (c *conn) paid(t uint64) {
	delete(c.owed, t)
	if c.paying {
		return
	}
	c.paying = true
	defer func() { c.paying = false }()
	for len(c.waits) > 0 {
		low := c.nextTicket
		for o := range c.owed {
			low = min(low, o)
		}
		w := c.waits[0]
		if w.upTo > low {
			return
		}
		c.waits[0] = owedWait{}
		c.waits = c.waits[1:]
		c.writeQueuedAcks()
		w.f()
	}
}

// afterOwed runs f once every ticket issued so far is paid: at once when
// none is outstanding. Functions run in the order they were given.
func (c *conn) afterOwed(f func()) {
	if len(c.owed) == 0 && len(c.waits) == 0 {
		c.writeQueuedAcks()
		f()
		return
	}
	c.waits = append(c.waits, owedWait{upTo: c.nextTicket, f: f})
}

// oweInTurn issues a ticket t for work that must also come after every
// ticket issued before it, and runs f(t) once those are paid: at once
// when none is outstanding. The work pays t when its answer is written.
// A transactional $management request and a discharge take their turn
// this way, so that a commit follows the operations of its transaction
// that the client sent before it.
func (c *conn) oweInTurn(f func(t uint64)) {
	t := c.owe()
	if len(c.owed) == 1 && len(c.waits) == 0 {
		c.writeQueuedAcks()
		f(t)
		return
	}
	c.waits = append(c.waits, owedWait{upTo: t, f: func() { f(t) }})
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

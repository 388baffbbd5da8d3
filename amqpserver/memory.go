package amqpserver

import (
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core/membudget"
)

// The memory budget (Config.Memory) on the AMQP front. What a connection
// holds for its peer is taken from it, and counted in conn.memHeld so
// that serve gives back whatever is left when the connection ends:
//
//   - incoming deliveries (incoming.go), read and not yet stored and
//     answered: the session incoming-window opens only as far as the
//     budget has room, and a session waiting for room is woken when the
//     budget frees some (waitForMemory). A connection holding nothing
//     may always take minIncomingFrames, so that small sends go on,
//     slowly, while others hold the budget;
//   - messages taken for delivery and not yet written (outgoing.go,
//     outqueue.go): a link takes no more than the budget has room for,
//     and one message at a time once the connection has written all it
//     took;
//   - transactions (txn.go): each message sent in a transaction, until
//     the transaction is discharged, times out or its coordinator goes;
//     a send that does not fit is rejected with server-busy;
//   - $management (mgmt.go, rpc.go): a request is answered with a 503
//     server-busy reply while the budget is used up, a peek takes the
//     bodies it loads from the budget, and a reply holds its bytes until
//     it is written.
//
// Incoming and outgoing bytes are already in memory when they are
// counted (the peer was allowed to send them, the message was taken), so
// they are taken with Acquire and may go past the limit by what the
// floors above allow; everything else is refused first.

// minIncomingFrames is the incoming window a connection holding no
// incoming bytes may always have.
const minIncomingFrames = 4

// errServerMemory is the error of work refused because the memory
// budget is used up: com.microsoft:server-busy, which the SDKs retry
// with backoff.
func errServerMemory() *frames.Error {
	return errorf(condServerBusy, "%s", memoryBusyText)
}

const memoryBusyText = "The server is busy: the memory its clients may make it hold (--max-memory) is in use. Please retry the operation later."

// holdMem takes n bytes (n < 0: gives back -n) of the budget for the
// connection, whatever the limit.
func (c *conn) holdMem(n int) {
	c.memHeld += n
	if n > 0 {
		c.srv.cfg.Memory.Acquire(int64(n))
	} else {
		c.srv.cfg.Memory.Release(int64(-n))
	}
}

// tryHoldMem takes n bytes of the budget for the connection if they fit.
func (c *conn) tryHoldMem(h membudget.Holder, n int) bool {
	if !c.srv.cfg.Memory.TryAcquire(h, int64(n)) {
		return false
	}
	c.memHeld += n
	return true
}

// holdIn counts n bytes of incoming deliveries held (n < 0: let go).
func (c *conn) holdIn(n int) {
	c.inBytes += n
	c.holdMem(n)
}

// holdOut counts n bytes taken for delivery and not yet written (n < 0:
// written or dropped).
func (c *conn) holdOut(n int) {
	c.outBytes += n
	c.holdMem(n)
}

// dropReplies forgets the replies a reply link holds for credit.
func (l *link) dropReplies() {
	for _, r := range l.out.replies {
		l.s.c.holdMem(-len(r))
	}
	l.out.replies = nil
}

// releaseMemory gives back what the connection still holds of the
// budget once it has ended: work whose answers could no longer be posted
// left its bytes counted.
func (c *conn) releaseMemory() {
	c.holdMem(-c.memHeld)
}

// memoryBound reports whether the budget, not the connection's own
// incoming buffer, is what keeps its windows shut.
func (c *conn) memoryBound() bool {
	return c.srv.cfg.Memory.Available() < int64(c.srv.cfg.Limits.MaxIncomingBuffer-c.inBytes)
}

// waitForMemory asks the budget to wake the connection once it has room,
// to reopen the windows it kept shut.
func (c *conn) waitForMemory() {
	if c.memWaiting {
		return
	}
	c.memWaiting = true
	c.srv.cfg.Memory.NotifyWhenFree(func() {
		c.post(func() {
			c.memWaiting = false
			c.feedStarved()
			c.wakeBuffer()
		})
	})
}

package amqpserver

import (
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
)

// A session receiver's lock ending (amqpserver/README.md, "Session lock
// lost").
//
// When the lock a session receiver link holds ends other than by the
// link's own detach (it expires, another receiver takes the session
// over, the broker serving the entity stops: a cluster group changing
// leaders), Service Bus detaches the link with
// com.microsoft:session-lock-lost, and the SDKs fail what comes next on
// the receiver with SessionLockLost. We do the same: the core closes
// the lock's Ended channel, and the link is detached, after the answers
// it is owed for settlements already under way (owed.go).
//
// A settlement that finds the session lock gone before the link is
// detached (a lock held by another node, whose end we are not told of,
// or one that lapsed before the broker's timer fired) is not answered:
// the link is detached instead. Answering it rejected would settle the
// delivery in go-amqp, and the Go SDK, which takes a lost lock on a
// session receiver for a recoverable error, settles again on a new link,
// which go-amqp then reports done without sending anything: a completion
// reported done and the message delivered again.

// watchSessionLock detaches l once sl, the session lock it holds, ends.
func (l *link) watchSessionLock(sl *core.SessionLock) {
	ended := sl.Ended()
	if ended == nil {
		return // held by another process: settlements find out (settleLost)
	}
	c := l.s.c
	c.work.Add(1)
	go func() {
		defer c.work.Done()
		select {
		case <-ended:
		case <-c.ctx.Done():
			return
		}
		c.post(func() {
			if l.out != nil && l.out.sess == sl && !l.detached {
				l.detach(sessionLockLostError())
			}
		})
	}()
}

// sessionLockLostError is what a session receiver's link is detached
// with when its session lock ends.
func sessionLockLostError() *frames.Error {
	return &frames.Error{Condition: condSessionLockLost,
		Description: "The session lock has expired on the MessageSession. Accept a new MessageSession."}
}

// settleLost reports whether err, the result of settling od, means the
// session lock od was received under is gone; if so it detaches od's
// link (unless already detached) with session-lock-lost, and the
// settlement must not be answered (see above). Server busy counts when
// the lock is gone too: the broker that held it closed (a cluster group
// changing leaders), and the SDK would retry a rejection with server-busy
// into the same false success. A message lock lost, or a store that
// refuses the write, while the session lock lives is answered as usual.
func settleLost(od *outDelivery, err error) bool {
	if od.sess == nil || err == nil {
		return false
	}
	switch core.CodeOf(err) {
	case core.CodeSessionLockLost:
	case core.CodeLockLost, core.CodeServerBusy:
		if lockLives(od.sess) {
			return false
		}
	default:
		return false
	}
	if l := od.l; !l.detached {
		l.detach(sessionLockLostError())
	}
	return true
}

// lockLives reports whether sl has not ended, as far as this process can
// tell: a lock held in another process (no Ended channel) counts as
// ended once an operation under it failed so.
func lockLives(sl *core.SessionLock) bool {
	ended := sl.Ended()
	if ended == nil {
		return false
	}
	select {
	case <-ended:
		return false
	default:
		return true
	}
}

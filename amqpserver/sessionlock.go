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
// A settlement of a session receiver's delivery is never answered
// rejected with a condition the Go SDK retries: message-lock-lost,
// session-lock-lost, server-busy or timeout. Answering so settles the
// delivery in go-amqp, and the Go SDK, which takes a lost lock on a
// session receiver for a recoverable error (and server-busy and timeout
// for passing ones), settles the same go-amqp message again, which go-amqp
// then reports done without sending anything: a completion reported done
// and the message delivered again. Such a settlement is not answered; the
// link is detached instead (session-lock-lost), and the SDK settles again
// through $management, whose answers it cannot mistake. That holds even
// while this process still sees the session lock live: a lock held by
// another node (whose end we are told of only a call's round trip later:
// clusterrpc watches it), one that lapsed before the
// broker's timer fired, and one whose broker can no longer write (its
// cluster group is changing leaders: the store refuses writes before the
// broker stops and ends its locks) all look alive here. The last was the
// cluster soak's "completed then delivered again": six completions of a
// session refused while the group's leader handed its leadership over,
// answered lock lost in the ~50 ms before its broker stopped, reported
// done by the SDK's retry, and delivered again to the session's next
// holder.

// watchSessionLock detaches l once sl, the session lock it holds, ends.
func (l *link) watchSessionLock(sl *core.SessionLock) {
	ended := sl.Ended()
	if ended == nil {
		return // held by another process that does not watch it: settlements find out (settleLost)
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

// settleLost reports whether err, the result of settling od, is one a
// session receiver must not be answered with (see above); if so it
// detaches od's link (unless already detached) with session-lock-lost,
// and the settlement is not answered. Only a delivery received under a
// session lock is concerned; the other conditions (not found, a bad
// request) are answered as usual.
func settleLost(od *outDelivery, err error) bool {
	if od.sess == nil || err == nil {
		return false
	}
	switch core.CodeOf(err) {
	case core.CodeSessionLockLost, core.CodeLockLost, core.CodeServerBusy, core.CodeOutcomeUnknown, core.CodeTimeout:
	default:
		return false
	}
	if l := od.l; !l.detached {
		l.detach(sessionLockLostError())
	}
	return true
}

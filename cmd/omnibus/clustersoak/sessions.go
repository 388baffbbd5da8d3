package clustersoak

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// With data groups and Config.Sessions > 0, a third queue is partitioned
// and requires sessions: one sender client sends to it from Sessions loops,
// each the only sender of a session of its own, one message at a time;
// one more receiver accepts the next session, takes what it holds (a few
// batches at most, so every session gets its turn) and moves on. The
// ledger checks a session's first deliveries come in the broker's order
// (its sequence numbers rise; but for messages the SDK gave back unseen,
// sdkrelease.go), the order book that the acknowledged
// messages were stored in send order in one partition, and both that
// every message came in the session and from the queue it was sent to.

// sessionQueueName is the soak's partitioned queue with sessions.
const sessionQueueName = "failover-sessions"

// batchesPerSession is how many receives a session receiver makes before
// it lets the session go.
const batchesPerSession = 8

// sessionReceiveLoop is the session receiver: id numbers it in the trace.
func (ld *load) sessionReceiveLoop(ctx context.Context, id int) {
	var cl *azservicebus.Client
	gen := 0
	defer func() {
		if cl != nil {
			cl.Close(context.Background())
		}
	}()
	for ctx.Err() == nil {
		if cl == nil {
			c, err := azservicebus.NewClientFromConnectionString(ld.conn, &azservicebus.ClientOptions{
				RetryOptions: azservicebus.RetryOptions{MaxRetries: -1}})
			if err != nil {
				pause(ctx, 50*time.Millisecond)
				continue
			}
			if gen > 0 {
				ld.reconnects.Add(1)
			}
			cl, gen = c, gen+1
		}
		actx, cancel := context.WithTimeout(ctx, time.Second)
		sr, err := cl.AcceptNextSessionForQueue(actx, sessionQueueName, nil)
		cancel()
		var sbErr *azservicebus.Error
		switch {
		case err == nil:
		case ctx.Err() != nil, errors.Is(err, context.DeadlineExceeded), errors.As(err, &sbErr) && sbErr.Code == azservicebus.CodeTimeout:
			continue // no session has messages now
		default:
			ld.trace.line("accept-session-failed rcv=%d.%d err=%q", id, gen, err.Error())
			go cl.Close(context.Background())
			cl = nil
			pause(ctx, 20*time.Millisecond)
			continue
		}
		var broken atomic.Bool
		ref := rcvRef{id: id, gen: gen, queue: sessionQueueName, session: sr.SessionID(), broken: func() { broken.Store(true) }}
		// What the SDK gave back unseen is put down before the
		// deliveries it may have put out of order (sdkrelease.go).
		var hold holdReleases
		unseen := func(msgs []*azservicebus.ReceivedMessage) {
			if n := hold.account(ld.releases, linkNames(msgs)...); n > 0 {
				ld.ledger.ReleasedUnseen(0, ref.session, n)
				ld.sdkReleased.Add(n)
				ld.trace.line("sdk-released rcv=%d.%d session=%s count=%d", id, gen, ref.session, n)
			}
		}
		for range batchesPerSession {
			rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			msgs, err := sr.ReceiveMessages(rctx, ld.c.Prefetch, nil)
			cancel()
			if err != nil && len(msgs) == 0 {
				if ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
					ld.trace.line("receive-failed rcv=%d.%d session=%s err=%q", id, gen, ref.session, err.Error())
					broken.Store(true)
				}
				break
			}
			if len(msgs) == 0 {
				break
			}
			unseen(msgs)
			ld.settleAll(ref, sr, msgs)
			if broken.Load() {
				break
			}
		}
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = sr.Close(cctx)
		cancel()
		unseen(nil) // released after the last receive: the next holder gets them
		if broken.Load() {
			go cl.Close(context.Background())
			cl = nil
		}
	}
}

// sessionOf is send loop j's session.
func sessionOf(j int) string { return fmt.Sprint("session-", j) }

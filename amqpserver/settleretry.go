package amqpserver

import (
	"context"
	"fmt"
	"time"

	"github.com/omnibusmq/omnibus/core"
)

// Settlements the broker could not apply for a passing reason
// (amqpserver/README.md, "Settlements retried by the broker").
//
// A completion (or abandon, defer, dead-letter) that meets a full disk or
// a cluster group changing leaders fails with server-busy, or with its
// outcome unknown (the write may or may not have happened). Answering
// the client's disposition rejected with that condition settles the
// delivery in go-amqp, and the Go SDK retries a server-busy or timeout
// settlement on the same message, which go-amqp then reports done
// without sending anything: CompleteMessage returned nil and the message
// came back (three in one cluster soak). So the server retries such a
// settlement itself, with growing pauses, for up to
// Config.SettleRetryFor, and answers what is final:
//
//   - accepted, once an attempt succeeds;
//   - message-lock-lost, once the lock is gone (it expired, or the
//     group's new leader holds no such lock), or when the time is up or
//     the server shuts down while every attempt was refused (server busy:
//     nothing was written). The message is delivered again once the lock
//     lapses: nothing lost, nothing reported done that was not.
//   - For an attempt whose outcome was unknown, a lost lock says nothing
//     (the completion may have removed the message, or the new leader
//     never had the lock): a completion then looks for its message by
//     sequence number, and answers accepted if it is gone, lock lost if
//     it is there (resolveUnknown). Past the time, at a shutdown, or when
//     the look fails, the answer stays com.microsoft:timeout, the outcome
//     unknown, as Service Bus says it: the one case the Go SDK may still
//     report done in error, and only when the write in doubt did not land.

// Bounds of the pauses between a settlement's retries.
const (
	settleRetryFirstPause = 50 * time.Millisecond
	settleRetryMaxPause   = time.Second
)

// settleRetryable reports whether err, the result of a settlement, may
// go away if the settlement is applied again.
func settleRetryable(err error) bool {
	if err == nil {
		return false // most results: no need to ask for a code
	}
	switch core.CodeOf(err) {
	case core.CodeServerBusy, core.CodeOutcomeUnknown, core.CodeTimeout:
		return true
	}
	return false
}

// anySettleRetryable reports whether one of errs is settleRetryable.
func anySettleRetryable(errs []error) bool {
	for _, err := range errs {
		if settleRetryable(err) {
			return true
		}
	}
	return false
}

// retrySettlements applies again, in a helper goroutine, the settlements
// whose errs are retryable and whose client awaits an answer (awaited),
// until each has a final result or Config.SettleRetryFor has passed;
// again applies the settlements at the given indexes and returns their
// results in the same order. errs is updated in place. answered is false
// if the connection ended while waiting: nothing is to be answered then.
// unknown[i] (nil when none) is set when an attempt of settlement i ended
// with its outcome unknown. A shutdown ends the retries at once, as
// SettleRetryFor passing does.
func (c *conn) retrySettlements(errs []error, awaited func(i int) bool, again func(idx []int) []error) (answered bool, unknown []bool) {
	deadline := time.Now().Add(c.srv.cfg.SettleRetryFor)
	pause := settleRetryFirstPause
	var idx []int
	note := func(i int) {
		if isOutcomeUnknown(errs[i]) {
			if unknown == nil {
				unknown = make([]bool, len(errs))
			}
			unknown[i] = true
		}
	}
	giveUp := func(why string) {
		for _, i := range idx {
			if unknown == nil || !unknown[i] {
				errs[i] = settleGaveUp(errs[i], why)
			}
		}
	}
	for i := range errs {
		note(i)
	}
	for {
		idx = idx[:0]
		for i, err := range errs {
			if settleRetryable(err) && awaited(i) {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			return true, unknown
		}
		if !time.Now().Add(pause).Before(deadline) {
			giveUp(fmt.Sprintf("still failing after %v", c.srv.cfg.SettleRetryFor))
			return true, unknown
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-c.ctx.Done():
			t.Stop()
			return false, unknown
		case <-c.srv.quit:
			// A shutdown does not wait for the store to recover. (Left
			// unanswered, the settlement would meet the drain's close,
			// amqp:connection:forced, which go-amqp also takes as the
			// delivery settled.)
			t.Stop()
			giveUp("the server is shutting down")
			return true, unknown
		}
		for j, err := range again(idx) {
			errs[idx[j]] = err
			note(idx[j])
		}
		pause = min(2*pause, settleRetryMaxPause)
	}
}

// isOutcomeUnknown reports whether err leaves a settlement's outcome
// unknown: the write may or may not have happened.
func isOutcomeUnknown(err error) bool {
	if err == nil {
		return false
	}
	switch core.CodeOf(err) {
	case core.CodeOutcomeUnknown, core.CodeTimeout:
		return true
	}
	return false
}

// resolveUnknown settles what a completion of od whose outcome was once
// unknown and which then found its lock lost (err) means: if its message
// is gone, the completion took effect (nil); if it is still there, the
// lock is lost and it will be delivered again (err). If the message
// cannot be looked for, the outcome stays unknown (com.microsoft:timeout).
func (c *conn) resolveUnknown(od *outDelivery, err error) error {
	msgs, perr := c.broker().Peek(context.WithoutCancel(c.ctx), od.entity, core.PeekOptions{From: od.seq, Max: 1})
	switch {
	case perr != nil:
		return &core.Error{Code: core.CodeOutcomeUnknown, Msg: fmt.Sprintf(
			"The completion may or may not have taken effect: its write's outcome is unknown and its message could not be looked for (%v).", perr)}
	case len(msgs) > 0 && msgs[0].SequenceNumber == od.seq:
		return err
	}
	return nil
}

// settleGaveUp is the error a settlement that failed with err is
// answered with when the server stops retrying it, for why (see above).
func settleGaveUp(err error, why string) error {
	return &core.Error{Code: core.CodeLockLost, Msg: fmt.Sprintf(
		"The settlement could not be applied (%v; %s): the message's lock is given up and it will be delivered again.", err, why)}
}

package amqpserver

import (
	"fmt"
	"time"

	"github.com/omnibusmq/omnibus/core"
)

// Settlements the broker could not apply for a passing reason
// (amqpserver/README.md, "Settlements retried by the broker").
//
// A completion (or abandon, defer, dead-letter) that meets a full disk or
// a cluster group changing leaders fails with server-busy, or with an
// outcome unknown (the write may or may not have happened). Answering
// the client's disposition rejected with that condition settles the
// delivery in go-amqp, and the Go SDK retries a server-busy or timeout
// settlement on the same message, which go-amqp then reports done
// without sending anything: CompleteMessage returned nil and the message
// came back (three in one cluster soak). So the server retries such a
// settlement itself, with growing pauses, for up to
// Config.SettleRetryFor, and answers only what is final: accepted, or
// message-lock-lost once the lock is gone (it expired, or the group's new
// leader holds no such lock; an outcome-unknown completion that was in
// fact applied ends here too: the message is gone, never delivered
// again). Past SettleRetryFor the settlement is answered
// message-lock-lost as well: the lock is of no more use to the client,
// which sees its settlement fail, and the message is delivered again
// once the lock lapses (nothing lost, nothing reported done that was
// not).

// Bounds of the pauses between a settlement's retries.
const (
	settleRetryFirstPause = 50 * time.Millisecond
	settleRetryMaxPause   = time.Second
)

// settleRetryable reports whether err, the result of a settlement, may
// go away if the settlement is applied again.
func settleRetryable(err error) bool {
	switch core.CodeOf(err) {
	case core.CodeServerBusy, core.CodeOutcomeUnknown, core.CodeTimeout:
		return err != nil
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
// results in the same order. errs is updated in place; it returns false
// if the connection ended while waiting: nothing is to be answered then.
// A shutdown ends the retries at once, as SettleRetryFor passing does.
func (c *conn) retrySettlements(errs []error, awaited func(i int) bool, again func(idx []int) []error) bool {
	deadline := time.Now().Add(c.srv.cfg.SettleRetryFor)
	pause := settleRetryFirstPause
	var idx []int
	for {
		idx = idx[:0]
		for i, err := range errs {
			if settleRetryable(err) && awaited(i) {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			return true
		}
		if !time.Now().Add(pause).Before(deadline) {
			for _, i := range idx {
				errs[i] = settleGaveUp(errs[i], fmt.Sprintf("still failing after %v", c.srv.cfg.SettleRetryFor))
			}
			return true
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-c.ctx.Done():
			t.Stop()
			return false
		case <-c.srv.quit:
			// A shutdown does not wait for the store to recover: the
			// lock is given up at once. (Left unanswered, the settlement
			// would meet the drain's close, amqp:connection:forced,
			// which go-amqp also takes as the delivery settled.)
			t.Stop()
			for _, i := range idx {
				errs[i] = settleGaveUp(errs[i], "the server is shutting down")
			}
			return true
		}
		for j, err := range again(idx) {
			errs[idx[j]] = err
		}
		pause = min(2*pause, settleRetryMaxPause)
	}
}

// settleGaveUp is the error a settlement that failed with err is
// answered with when the server stops retrying it, for why (see above).
func settleGaveUp(err error, why string) error {
	return &core.Error{Code: core.CodeLockLost, Msg: fmt.Sprintf(
		"The settlement could not be applied (%v; %s): the message's lock is given up and it will be delivered again.", err, why)}
}

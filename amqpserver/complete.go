package amqpserver

import (
	"context"

	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
)

// pendingComplete is a delivery the client accepted (complete), waiting
// for the end of the connection loop's pass to go to the broker with the
// others accepted in the same pass.
type pendingComplete struct {
	s      *session
	id     uint32
	od     *outDelivery
	answer bool // the client awaits our settled disposition
}

// submitCompletes applies the completions queued in this pass: one
// core.CompleteMany per entity, in a helper goroutine, so a burst of
// accepts costs one store write and one wake-up of the connection instead
// of one each. Each delivery is still answered on its own, once its
// removal is durable (or with the error that kept it).
func (c *conn) submitCompletes() {
	pending := c.completes
	c.completes = nil
	for len(pending) > 0 {
		entity := pending[0].od.entity
		group, rest := pending, []pendingComplete(nil)
		for i := 1; i < len(pending); i++ {
			if pending[i].od.entity != entity {
				group, rest = splitByEntity(pending, entity)
				break
			}
		}
		c.completeMany(entity, group)
		pending = rest
	}
}

// splitByEntity separates the completions for entity from the others,
// keeping their order.
func splitByEntity(pending []pendingComplete, entity string) (same, other []pendingComplete) {
	for _, pc := range pending {
		if pc.od.entity == entity {
			same = append(same, pc)
		} else {
			other = append(other, pc)
		}
	}
	return same, other
}

// completeMany completes group, all on entity, and answers each delivery.
// The removals are waited for on disk only if a client awaits our answer
// (rcv-settle-mode second, as the Azure SDKs use); a client that settled
// on its own was promised nothing (see core.Broker.CompleteMany).
//
// While a CompleteMany of the connection is in flight, the completions
// that arrive wait for it (conn.endPass) and go together at the end of
// the pass that answers it, or at once before a frame that must follow
// them (submitPending), as a link's sends do (link.hold): a client that
// settles each delivery in a frame of its own then still has its
// completions committed in groups as large as the commit latency allows.
func (c *conn) completeMany(entity string, group []pendingComplete) {
	toks := make([]core.LockToken, len(group))
	durable := false
	for i, pc := range group {
		toks[i] = pc.od.token
		durable = durable || pc.answer
	}
	ticket := c.owe()
	c.completing++
	c.goWork(func() {
		errs := c.broker().CompleteMany(entity, toks, durable)
		answered, retried := true, anySettleRetryable(errs)
		if retried {
			// Completions that arrive meanwhile need not wait for these.
			c.postHere(func() { c.completing-- })
			var unknown []bool
			answered, unknown = c.retrySettlements(errs, func(i int) bool { return group[i].answer }, func(idx []int) []error {
				again := make([]core.LockToken, len(idx))
				for j, i := range idx {
					again[j] = toks[i]
				}
				return c.broker().CompleteMany(entity, again, true)
			})
			for i, u := range unknown {
				if u && answered && core.CodeOf(errs[i]) == core.CodeLockLost {
					errs[i] = c.resolveUnknown(group[i].od, errs[i])
				}
			}
		}
		for i, pc := range group {
			errs[i] = c.sessionLockErr(pc.od, errs[i])
		}
		c.srv.stats.requests(errs)
		c.postHere(func() {
			if !retried {
				c.completing--
			}
			for i, pc := range group {
				if answered && pc.answer && !settleLost(pc.od, errs[i]) {
					pc.s.answerSettle(pc.id, &frames.Accepted{}, core.Complete, errs[i])
				}
			}
			c.paid(ticket)
		})
	})
}

// pendingSettle is a delivery the client settled with an outcome other
// than accepted, waiting for the end of the connection loop's pass.
type pendingSettle struct {
	s       *session
	id      uint32
	od      *outDelivery
	answer  bool
	state   frames.DeliveryState
	outcome core.Outcome
}

// submitSettles applies the other outcomes queued in this pass in one
// helper goroutine, one after the other in the order the client sent
// them: released or abandoned messages become available again in that
// order. Until they have, the links that delivered them take no more
// messages (see link.pull), so a client that releases deliveries and
// then asks for more gets them back in sequence order.
func (c *conn) submitSettles() {
	pending := c.settles
	if len(pending) == 0 {
		return
	}
	c.settles = nil
	ticket := c.owe()
	c.goWork(func() {
		errs := make([]error, len(pending))
		settle := func(ps pendingSettle) error {
			return c.broker().Settle(context.WithoutCancel(c.ctx), ps.od.entity, ps.od.token, ps.outcome)
		}
		for i, ps := range pending {
			errs[i] = settle(ps)
		}
		answered := true
		if anySettleRetryable(errs) {
			answered, _ = c.retrySettlements(errs, func(i int) bool { return pending[i].answer }, func(idx []int) []error {
				out := make([]error, len(idx))
				for j, i := range idx {
					out[j] = settle(pending[i])
				}
				return out
			})
		}
		for i, ps := range pending {
			errs[i] = c.sessionLockErr(ps.od, errs[i])
		}
		c.srv.stats.requests(errs)
		c.postHere(func() {
			for i, ps := range pending {
				if answered && ps.answer && !settleLost(ps.od, errs[i]) {
					ps.s.answerSettle(ps.id, ps.state, ps.outcome.Kind, errs[i])
				}
				l := ps.od.l
				if l.out.settling--; l.out.settling == 0 {
					l.pullNext()
				}
			}
			c.paid(ticket)
		})
	})
}

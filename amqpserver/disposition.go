package amqpserver

import (
	"context"
	"fmt"

	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
)

// Keys of the com.microsoft:dead-letter error info (amqp.md §5.1).
const (
	infoDeadLetterReason      = "DeadLetterReason"
	infoDeadLetterDescription = "DeadLetterErrorDescription"
)

// handleDisposition applies the client's dispositions. Role receiver:
// outcomes for deliveries we sent (peek-lock settlement, amqp.md §5.2),
// possibly a range. Role sender: the client settling its own deliveries
// after our unsettled disposition (rcv-settle-mode second); nothing to do.
func (s *session) handleDisposition(d *frames.Disposition) {
	if d.Role != frames.RoleReceiver {
		return
	}
	last := d.First
	if d.Last != nil {
		last = *d.Last
	}
	if last-d.First >= uint32(len(s.unsettled)) {
		// A wide range: walk the (smaller) map instead of the range.
		for id, od := range s.unsettled {
			if id-d.First <= last-d.First {
				s.settleOut(id, od, d)
			}
		}
		return
	}
	for id := d.First; ; id++ {
		if od := s.unsettled[id]; od != nil {
			s.settleOut(id, od, d)
		}
		if id == last {
			break
		}
	}
}

// settleOut applies one client outcome to a peek-locked delivery in a
// helper goroutine and answers with a settled disposition carrying the
// final state, or rejected{message-lock-lost} (or session-lock-lost) when
// the lock is gone. Unknown ids and dispositions without an outcome are
// ignored (amqp.md §5.2).
func (s *session) settleOut(id uint32, od *outDelivery, d *frames.Disposition) {
	if d.State == nil {
		if d.Settled {
			delete(s.unsettled, id)
		}
		return
	}
	outcome, ok := outcomeOf(d.State)
	if !ok {
		return // received{} and the like: not an outcome
	}
	delete(s.unsettled, id)
	c := s.c
	state := d.State
	answer := !d.Settled
	c.goWork(func() {
		err := c.srv.b.Settle(context.WithoutCancel(c.ctx), od.entity, od.token, outcome)
		err = c.srv.sessionLockErr(od, err)
		if !answer {
			return
		}
		final := state
		switch {
		case err != nil:
			final = &frames.Rejected{Error: amqpError(err)}
		case outcome.Kind == core.DeadLetter:
			// Success is a rejected state without an error: go-amqp
			// reports any error in the reply as a failed settlement.
			final = &frames.Rejected{}
		}
		c.post(func() {
			if s.live() {
				c.write(s.ch, &frames.Disposition{Role: frames.RoleSender, First: id, Settled: true, State: final})
			}
		})
	})
}

// sessionLockErr reports a lost message lock of a message received under
// a session whose lock has expired as the session lock being lost, which
// is what the SDKs expect (amqp.md §5.2).
func (s *Server) sessionLockErr(od *outDelivery, err error) error {
	if err == nil || od.sess == nil || core.CodeOf(err) != core.CodeLockLost {
		return err
	}
	if s.b.Now() < od.sess.LockedUntil.UnixNano() {
		return err
	}
	return &core.Error{Code: core.CodeSessionLockLost,
		Msg: "The session lock has expired on the MessageSession. Accept a new MessageSession."}
}

// outcomeOf maps a client delivery state to a core outcome (amqp.md §5.1):
// accepted = complete; modified with undeliverable-here = defer, other
// modified = abandon (annotations become property updates); rejected =
// dead-letter (reason and description from the com.microsoft:dead-letter
// info, other info entries property updates); released = release.
func outcomeOf(st frames.DeliveryState) (core.Outcome, bool) {
	switch x := st.(type) {
	case *frames.Accepted:
		return core.Outcome{Kind: core.Complete}, true
	case *frames.Released:
		return core.Outcome{Kind: core.Release}, true
	case *frames.Modified:
		o := core.Outcome{Kind: core.Abandon, Properties: propsFromMap(x.MessageAnnotations, nil)}
		if x.UndeliverableHere {
			o.Kind = core.Defer
		}
		return o, true
	case *frames.Rejected:
		o := core.Outcome{Kind: core.DeadLetter}
		if x.Error != nil {
			o.Properties = propsFromMap(x.Error.Info, func(k string, v any) bool {
				switch k {
				case infoDeadLetterReason:
					o.DeadLetterReason = textOf(v)
				case infoDeadLetterDescription:
					o.DeadLetterDescription = textOf(v)
				default:
					return false
				}
				return true
			})
			if x.Error.Condition != condDeadLetter {
				if o.DeadLetterReason == "" {
					o.DeadLetterReason = string(x.Error.Condition)
				}
				if o.DeadLetterDescription == "" {
					o.DeadLetterDescription = x.Error.Description
				}
			}
		}
		return o, true
	}
	return core.Outcome{}, false
}

// propsFromMap converts an AMQP map of property updates to core values,
// skipping keys take claims and values core cannot store.
func propsFromMap(m encoding.Map, take func(k string, v any) bool) map[string]any {
	var out map[string]any
	for _, kv := range m {
		var k string
		switch kk := kv.Key.(type) {
		case string:
			k = kk
		case encoding.Symbol:
			k = string(kk)
		default:
			continue
		}
		if take != nil && take(k, kv.Value) {
			continue
		}
		v, err := valueFromAMQP(kv.Value)
		if err != nil {
			continue
		}
		if out == nil {
			out = make(map[string]any, len(m))
		}
		out[k] = v
	}
	return out
}

// textOf renders a reason or description value as text (null is "").
func textOf(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case encoding.Symbol:
		return string(x)
	}
	return fmt.Sprint(v)
}

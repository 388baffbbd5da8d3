package amqpserver

import (
	"fmt"
	"slices"

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
// ignored (amqp.md §5.2). Settlements are queued and applied at the end
// of the connection loop's pass (see submitCompletes and submitSettles).
func (s *session) settleOut(id uint32, od *outDelivery, d *frames.Disposition) {
	if d.State == nil {
		if d.Settled {
			s.forgetUnsettled(id, od)
		}
		return
	}
	if ts, ok := d.State.(*frames.TransactionalState); ok {
		s.settleInTxn(id, od, d, ts)
		return
	}
	outcome, ok := outcomeOf(d.State)
	if !ok {
		return // received{} and the like: not an outcome
	}
	c := s.c
	answer := !d.Settled
	if outcome.Kind == core.Complete {
		s.forgetUnsettled(id, od)
		c.completes = append(c.completes, pendingComplete{s: s, id: id, od: od, answer: answer})
		return
	}
	od.l.out.settling++ // before the link may pull again: see submitSettles
	s.forgetUnsettled(id, od)
	c.settles = append(c.settles, pendingSettle{s: s, id: id, od: od, answer: answer, state: d.State, outcome: outcome})
}

// forgetUnsettled removes delivery id, which the client settled, from
// the unsettled deliveries; a link held back by the unsettled cap
// (Limits.MaxUnsettledPerLink) may pull again.
func (s *session) forgetUnsettled(id uint32, od *outDelivery) {
	delete(s.unsettled, id)
	o := od.l.out
	o.unsettled--
	if o.unsettled == s.c.srv.cfg.Limits.MaxUnsettledPerLink-1 {
		od.l.pull()
	}
}

// answerSettle tells the client the final state of delivery id, which it
// settled with state: the outcome, or rejected with the error that kept
// the outcome from being applied.
func (s *session) answerSettle(id uint32, state frames.DeliveryState, kind core.OutcomeKind, err error) {
	if !s.live() {
		return
	}
	final := state
	switch {
	case err != nil:
		final = &frames.Rejected{Error: amqpError(err)}
	case kind == core.DeadLetter:
		// Success is a rejected state without an error: go-amqp
		// reports any error in the reply as a failed settlement.
		final = &frames.Rejected{}
	}
	if _, ok := final.(*frames.Accepted); ok {
		s.queueAck(frames.RoleSender, id)
		return
	}
	s.c.write(s.ch, &frames.Disposition{Role: frames.RoleSender, First: id, Settled: true, State: final})
}

// sessionLockErr reports a lost message lock of a message received under
// a session whose lock has expired as the session lock being lost, which
// is what the SDKs expect (amqp.md §5.2).
func (c *conn) sessionLockErr(od *outDelivery, err error) error {
	if err == nil || od.sess == nil || core.CodeOf(err) != core.CodeLockLost {
		return err
	}
	if c.broker().Now() < od.sess.LockedUntil.UnixNano() {
		return err
	}
	return &core.Error{Code: core.CodeSessionLockLost,
		Msg: "The session lock has expired on the MessageSession. Accept a new MessageSession."}
}

// ackIndex maps the role of an acknowledgement to its queue in
// session.acks.
func ackIndex(r frames.Role) int {
	if r == frames.RoleReceiver {
		return 0
	}
	return 1
}

// queueAck records that delivery id was accepted and settled by us in
// role r. The connection writes pending acknowledgements as range
// dispositions just before it flushes, so a burst of completed sends or
// completions costs a few frames.
func (s *session) queueAck(r frames.Role, id uint32) {
	if len(s.acks[0]) == 0 && len(s.acks[1]) == 0 {
		s.c.ackers = append(s.c.ackers, s)
	}
	i := ackIndex(r)
	s.acks[i] = append(s.acks[i], id)
}

// writeAcks writes the pending acknowledgements of s as dispositions, one
// per run of consecutive delivery ids.
func (s *session) writeAcks() {
	for _, r := range [...]frames.Role{frames.RoleReceiver, frames.RoleSender} {
		i := ackIndex(r)
		ids := s.acks[i]
		s.acks[i] = ids[:0]
		if !s.live() {
			continue
		}
		slices.Sort(ids)
		for j := 0; j < len(ids); {
			k := j
			for k+1 < len(ids) && ids[k+1] == ids[k]+1 {
				k++
			}
			d := &frames.Disposition{Role: r, First: ids[j], Settled: true, State: &frames.Accepted{}}
			if k > j {
				last := ids[k]
				d.Last = &last
			}
			s.c.write(s.ch, d)
			j = k + 1
		}
	}
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

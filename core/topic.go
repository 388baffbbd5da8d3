package core

import (
	"github.com/omnibusmq/omnibus/core/filter"
)

// Topics.
//
// A send to a topic is stored once: one body record under the topic's id,
// plus one state record per subscription whose rules match. The topic
// counts references to each shared body (entity.refs) so the body is
// deleted with its last subscription copy. A subscription copy that a
// rule action, an abandon with properties or a dead-letter changes gets a
// private body under the subscription's own id.

// compiledRule is a rule ready to evaluate.
type compiledRule struct {
	Rule
	filter filter.Filter
	action *filter.Action // nil: no action
}

func compileRule(r *Rule) (*compiledRule, error) {
	c := &compiledRule{Rule: *r}
	switch r.Filter.Kind {
	case FilterTrue:
		c.filter = filter.TrueFilter{}
	case FilterFalse:
		c.filter = filter.FalseFilter{}
	case FilterSQL:
		f, err := filter.Compile(r.Filter.SQL)
		if err != nil {
			return nil, errf(CodeBadRequest, "rule %q: %v", r.Name, err)
		}
		c.filter = f
	case FilterCorrelation:
		cf := r.Filter.Correlation
		if cf == nil {
			return nil, errf(CodeBadRequest, "rule %q: correlation filter has no properties", r.Name)
		}
		f := &filter.CorrelationFilter{
			CorrelationID: cf.CorrelationID, MessageID: cf.MessageID, To: cf.To, ReplyTo: cf.ReplyTo,
			Subject: cf.Subject, SessionID: cf.SessionID, ReplyToSessionID: cf.ReplyToSessionID,
			ContentType: cf.ContentType, Properties: cf.Properties,
		}
		if f.IsEmpty() {
			return nil, errf(CodeBadRequest, "rule %q: a correlation filter needs at least one property", r.Name)
		}
		c.filter = f
	default:
		return nil, errf(CodeBadRequest, "rule %q: unknown filter kind %d", r.Name, r.Filter.Kind)
	}
	if r.Action != "" {
		a, err := filter.CompileAction(r.Action)
		if err != nil {
			return nil, errf(CodeBadRequest, "rule %q action: %v", r.Name, err)
		}
		c.action = a
	}
	return c, nil
}

// subscriptionMatch is the result of evaluating a subscription's rules.
type subscriptionMatch struct {
	matched bool
	actions []*filter.Action // actions of the matching rules, in rule order
	err     error            // a filter failed to evaluate
}

func (e *entity) match(fm *filterMsg) subscriptionMatch {
	var res subscriptionMatch
	rules := e.root().rules.Load() // a partition has its parent's
	if rules == nil {
		return res
	}
	for _, r := range *rules {
		ok, err := r.filter.Match(fm)
		if err != nil {
			res.err = err
			continue
		}
		if ok {
			res.matched = true
			if r.action != nil {
				res.actions = append(res.actions, r.action)
			}
		}
	}
	return res
}

// fanOut places a topic message into every matching subscription.
func (p *sendPlan) fanOut(t *entity, d *Entity, ps *pendingSend, m *Message, seq int64, base int64, size int32, hops int) error {
	subs := t.subs.Load()
	if subs == nil {
		return nil
	}
	sharedUsed := false
	fm := &filterMsg{m: m} // one decode of m's properties for every filter
	for _, s := range *subs {
		sd := s.desc.Load()
		res := s.match(fm)
		if p.b.cfg.Faults.IgnoreFilters {
			res.matched, res.err = true, nil
		}
		q := s.q
		if res.err != nil && !res.matched {
			if !sd.DeadLetteringOnFilterEvaluationExceptions {
				continue
			}
			q = s.q.dead
		} else if !res.matched {
			continue
		}
		if sd.RequiresSession && m.SessionID == "" && q == s.q {
			// Service Bus cannot deliver it there; it dead-letters.
			q = s.q.dead
		}
		cp := m
		if len(res.actions) > 0 || q != s.q {
			cp = m.Clone()
			if err := cp.ownProperties(); err != nil { // to be changed
				return errf(CodeBadRequest, "'%s': %v", sd.Path(), err)
			}
			cfm := &filterMsg{m: cp}
			for _, a := range res.actions {
				if err := a.Apply(cfm); err != nil {
					return errf(CodeBadRequest, "rule action of '%s': %v", sd.Path(), err)
				}
			}
			if q != s.q {
				if cp.ApplicationProperties == nil {
					cp.ApplicationProperties = map[string]any{}
				}
				reason := "Session id is not set on a message sent to a session-enabled subscription."
				if res.err != nil {
					reason = res.err.Error()
				}
				cp.ApplicationProperties["DeadLetterReason"] = ReasonFilterException
				cp.ApplicationProperties["DeadLetterErrorDescription"] = reason
			}
		}
		if sd.ForwardTo != "" && q == s.q {
			target, err := p.forwardTarget(sd, sd.ForwardTo, hops)
			if err != nil {
				return err
			}
			if err := p.addForwarded(s, target, []*Message{cloneForForward(cp)}, nil, hops+1); err != nil {
				return err
			}
			continue
		}
		ttl := effectiveTTL(cp.TimeToLive, min(d.DefaultMessageTimeToLive, sd.DefaultMessageTimeToLive))
		owner := t.id
		if cp != m {
			owner = q.id
			body, err := encodeBody(nil, cp)
			if err != nil {
				return err
			}
			p.batch.Set(seqKey(tabBody, owner, seq), body)
		} else {
			sharedUsed = true
		}
		r := p.newRec(cp, seq, owner, base, ttl, size)
		if q != s.q {
			r.expiresAt = 0
		}
		p.states.SetNew(seqKey(tabState, q.id, seq), r.encode(nil)) // seq was just assigned
		ps.places = append(ps.places, placement{q: q, r: r})
	}
	if sharedUsed {
		body, err := encodeBody(nil, m)
		if err != nil {
			return err
		}
		p.batch.Set(seqKey(tabBody, t.id, seq), body)
	}
	return nil
}

// cloneForForward prepares a copy of a delivered message for re-sending
// to a forwarding target, which stamps its own broker properties.
func cloneForForward(m *Message) *Message {
	c := m.Clone()
	c.SequenceNumber = 0
	c.LockToken = LockToken{}
	return c
}

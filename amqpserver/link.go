package amqpserver

import (
	"strings"

	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/sas"
)

// nodeKind says what a link is attached to.
type nodeKind uint8

const (
	nodeEntity      nodeKind = iota // a queue, topic, subscription or dead-letter subqueue
	nodeCBS                         // the $cbs claims node
	nodeManagement                  // <entity>/$management
	nodeCoordinator                 // a transaction coordinator (coordinator.go)
)

const (
	cbsAddress   = "$cbs"
	mgmtSuffix   = "/$management"
	propTimeout  = encoding.Symbol("com.microsoft:timeout")
	propLockedTo = encoding.Symbol("com.microsoft:locked-until-utc")
)

// link is one attached link. Owned by the connection goroutine. Exactly
// one of in and out is set: in when the client sends to us (our role is
// receiver), out when we send to the client.
type link struct {
	s      *session
	name   string
	handle uint32 // the peer's handle; ours is the same number
	kind   nodeKind
	// address is the node the link is attached to: the entity path, "$cbs"
	// or "<entity>/$management" (see linkPath). The attach is answered
	// with the terminus exactly as the client sent it.
	address string
	entity  string // entity path (for $management links, without the suffix)
	// peerTarget is the client's target address on a link the client
	// receives on: replies are routed by it (amqp.md §2.1).
	peerTarget string
	snd        frames.SenderSettleMode
	rcv        frames.ReceiverSettleMode
	attached   bool // our attach has been sent
	detached   bool // detach sent or received; the link is gone
	// need is the right the link was attached with and keeps needing
	// (any one of them when needAny); 0 for $cbs. See authorizeAttach
	// and lifetimeCheck.
	need    sas.Rights
	needAny bool
	// sendTo is the entity a send-via sender stores into (its
	// com.microsoft:transfer-destination-address); via is the entity the
	// transactional sends of a sender on a cross-entity session go
	// through. "" for the link's own entity (txn.go).
	sendTo string
	via    string
	// jms is the subscription a JMS consumer on a topic reads (jms.go);
	// unsubscribe marks the link of a JMS unsubscribe, whose closing
	// detach deletes the subscription at entity.
	jms         *jmsSubscription
	unsubscribe bool
	// temporary is the JMS temporary queue or topic the link made,
	// deleted when it goes (jmstemp.go).
	temporary string

	in  *inLink
	out *outLink
}

// handleAttach attaches a link the client asks for.
func (s *session) handleAttach(a *frames.Attach) error {
	lim := &s.c.srv.cfg.Limits
	if a.Handle > lim.handleMax() {
		// §2.5.1 (begin, handle-max): a handle outside the range we
		// advertised closes the connection with framing-error.
		return closeWith(frames.CondFramingError, "handle %d above handle-max %d", a.Handle, lim.handleMax())
	}
	if s.handleInUse(a.Handle) {
		s.end(errorf(frames.CondHandleInUse, "handle %d is already attached", a.Handle))
		return nil
	}
	if s.c.links >= lim.MaxLinksPerConnection {
		// Service Bus ends the session with this condition and text.
		s.end(errorf(frames.CondResourceLimitExceeded,
			"Cannot allocate more handles to the current session or connection. The maximum number of handles allowed is %d. Please free up resources and try again.",
			lim.MaxLinksPerConnection))
		return nil
	}
	l := &link{s: s, name: a.Name, handle: a.Handle, snd: a.SenderSettleMode(), rcv: a.ReceiverSettleMode()}
	s.addLink(l)
	if a.Role == frames.RoleSender {
		if a.Coordinator != nil {
			l.in = &inLink{}
			if e := s.c.authorizeCoordinator(); e != nil {
				l.refuse(a, e)
				return nil
			}
			l.attachCoordinator(a)
			return nil
		}
		if a.Target == nil {
			l.refuse(a, errorf(frames.CondInvalidField, "Attach of a sender without a target."))
			return nil
		}
		l.address = linkPath(a.Target.Address)
		l.in = &inLink{maxSize: s.c.srv.cfg.MaxMessageSize}
		if a.Target.Dynamic {
			l.attachJMSTemporary(a)
			return nil
		}
	} else {
		if a.Source == nil {
			// JMS unsubscribe: a lookup of a durable subscription by link name.
			l.out = &outLink{}
			l.attachJMSLookup(a)
			return nil
		}
		l.address = linkPath(a.Source.Address)
		if a.Target != nil {
			l.peerTarget = a.Target.Address
		}
		l.out = &outLink{}
	}
	l.kind, l.entity = classify(l.address)
	if e := s.c.authorizeAttach(l); e != nil {
		l.refuse(a, e)
		return nil
	}

	switch l.kind {
	case nodeCBS:
		if l.in != nil {
			l.in.maxSize = s.c.srv.cfg.MaxCBSMessageSize
		}
		l.attach(a, nil)
	case nodeManagement:
		if e := s.c.checkEntity(l.entity); e != nil {
			l.refuse(a, e)
			return nil
		}
		l.attach(a, nil)
	default:
		if e := s.c.checkEntity(l.entity); e != nil {
			if kind, ok := s.c.jmsAutoCreate(l, a, e); ok {
				l.autoCreate(a, kind)
				return nil
			}
			l.refuse(a, e)
			return nil
		}
		l.attachEntity(a)
	}
	return nil
}

// attachEntity completes the attach of a link to an entity that exists.
func (l *link) attachEntity(a *frames.Attach) {
	s := l.s
	if l.out != nil && isJMSTopic(a.Source.Capabilities) && s.c.isTopic(l.entity) {
		l.attachJMSConsumer(a)
		return
	}
	if e := s.c.checkDirection(l.entity, l.in != nil); e != nil {
		l.refuse(a, e)
		return
	}
	if e := l.joinTxnGroup(); e != nil {
		l.refuse(a, e)
		return
	}
	if l.in != nil {
		l.attachSender(a)
	} else {
		l.attachReceiver(a)
	}
}

// linkPath is the node a link address names. An address given as a URL,
// "amqps://host[:port]/orders" as uamqp sends, names the node by its
// path: scheme and authority are dropped, as Service Bus does and as the
// $cbs audience is read (audiencePath). Other addresses are kept.
func linkPath(addr string) string {
	scheme, rest, ok := strings.Cut(addr, "://")
	if !ok || scheme == "" || strings.ContainsAny(scheme, "/$") {
		return addr
	}
	_, path, _ := strings.Cut(rest, "/")
	return path
}

// classify splits an address into its node kind and entity path.
func classify(addr string) (nodeKind, string) {
	p := strings.Trim(addr, "/")
	if strings.EqualFold(p, cbsAddress) {
		return nodeCBS, ""
	}
	if n := len(p) - len(mgmtSuffix); n >= 0 && strings.EqualFold(p[n:], mgmtSuffix) {
		return nodeManagement, p[:n]
	}
	return nodeEntity, p
}

// checkEntity returns amqp:not-found with the Service Bus description when
// no entity exists at path.
func (c *conn) checkEntity(path string) *frames.Error {
	if c.nsDeleted() {
		return errorf(frames.CondNotFound, "The messaging entity 'sb://%s/%s' could not be found: its namespace was deleted.", c.namespace().Name(), path)
	}
	if _, err := c.broker().GetEntity(path); err != nil {
		if conditionOf(err).cond == frames.CondNotFound {
			return c.notFoundError(path)
		}
		return amqpError(err)
	}
	return nil
}

// isTopic reports whether path names a topic.
func (c *conn) isTopic(path string) bool {
	e, err := c.broker().GetEntity(path)
	return err == nil && e.Kind == core.KindTopic
}

// checkDirection refuses sending to a subscription or a dead-letter
// subqueue, and receiving from a topic, with amqp:not-allowed.
func (c *conn) checkDirection(path string, send bool) *frames.Error {
	a := core.ParseAddress(path)
	if send {
		if a.Sub != "" || a.DeadLetter {
			return errorf(frames.CondNotAllowed, "Cannot send to '%s': send to its queue or topic.", path)
		}
		return nil
	}
	if e, err := c.broker().GetEntity(path); err == nil && e.Kind == core.KindTopic {
		return errorf(frames.CondNotAllowed, "Cannot receive from topic '%s': receive from one of its subscriptions.", path)
	}
	return nil
}

// attach sends our attach for l, echoing the client's terminus and settle
// modes (go-amqp fails the attach when a requested mode is not echoed),
// with properties props.
func (l *link) attach(a *frames.Attach, props encoding.Map) {
	l.attached = true
	reply := &frames.Attach{
		Name:          a.Name,
		Handle:        l.handle,
		Role:          !a.Role,
		SndSettleMode: a.SndSettleMode,
		RcvSettleMode: a.RcvSettleMode,
		Source:        a.Source,
		Target:        a.Target,
		Coordinator:   a.Coordinator,
		Properties:    props,
	}
	if l.out != nil {
		var zero uint32
		reply.InitialDeliveryCount = &zero
	} else {
		reply.MaxMessageSize = l.in.maxSize
	}
	l.s.c.write(l.s.ch, reply)
	if l.in != nil {
		l.grantCredit()
	}
}

// refuse answers an attach with a null terminus and an immediate closing
// detach carrying e (amqp.md §3.3), in the same flush.
func (l *link) refuse(a *frames.Attach, e *frames.Error) {
	reply := &frames.Attach{
		Name:          a.Name,
		Handle:        l.handle,
		Role:          !a.Role,
		SndSettleMode: a.SndSettleMode,
		RcvSettleMode: a.RcvSettleMode,
	}
	if a.Role == frames.RoleSender {
		reply.Source = a.Source
	} else {
		reply.Target = a.Target
		var zero uint32
		reply.InitialDeliveryCount = &zero
	}
	l.s.c.write(l.s.ch, reply)
	l.detach(e)
}

// detach closes the link from our side with e (nil for a clean close).
// Its state is dropped at once; its handle stays in use until the
// client's detach answers ours. The detach goes out after the answers
// the client is owed for what it sent before (owed.go), acknowledgements
// queued for the pass's end included: a settlement of
// the link under way when a pull fails is carried out all the same, and
// a client that saw the detach first takes it for failed (the Go SDK
// then settles again through $management, which finds no lock: lock
// lost for a message that is gone, never delivered again). Settlements
// still queued in the connection (waiting for a CompleteMany in flight,
// or for the pass's end) go to the broker first, so that they owe their
// answers too: otherwise they were applied after the detach was written.
func (l *link) detach(e *frames.Error) {
	if l.detached {
		return
	}
	l.s.c.submitPending()
	l.release()
	l.s.forgetLink(l.handle)
	s, h := l.s, l.handle
	s.c.afterOwed(func() {
		if s.live() {
			s.writeAcks() // the settlements' queued answers go first
			s.c.write(s.ch, &frames.Detach{Handle: h, Closed: true, Error: e})
		}
	})
}

// handleDetach answers the client's detach and forgets the link.
func (s *session) handleDetach(d *frames.Detach) error {
	if _, ok := s.awaiting[d.Handle]; ok {
		// The answer to our detach: the handle is free again.
		delete(s.awaiting, d.Handle)
		s.c.links--
		return nil
	}
	l := s.links[d.Handle]
	if l == nil {
		s.end(errorf(frames.CondUnattachedHandle, "detach of unattached handle %d", d.Handle))
		return nil
	}
	delete(s.links, d.Handle)
	s.c.links--
	if !l.detached {
		// Answered once the settlements sent before the detach are
		// applied and the link's message session is released (owed.go),
		// with the client's closed flag: a JMS durable consumer detaches
		// without closing.
		l.release()
		answer := func() {
			if s.live() {
				s.c.write(s.ch, &frames.Detach{Handle: d.Handle, Closed: d.Closed})
			}
		}
		if l.unsubscribe && d.Closed {
			s.c.afterOwed(func() { s.c.unsubscribed(l.entity, answer) })
		} else {
			s.c.afterOwed(answer)
		}
	}
	return nil
}

// release stops the link's work: pulls are cancelled, a held message
// session is closed. Message locks survive (they can still be settled
// through $management). The handle stays reserved until the client's
// detach arrives.
func (l *link) release() {
	if l.detached {
		return
	}
	l.detached = true
	if l.out != nil {
		l.releaseOut()
	} else if l.in != nil {
		l.dropPartial()
		if l.temporary != "" {
			l.s.c.deleteTemporary(l.temporary)
		}
		if l.kind == nodeCoordinator {
			l.releaseCoordinator()
		}
	}
}

// handleFlow applies a link flow from the client.
func (l *link) handleFlow(f *frames.Flow) {
	if l.detached {
		return
	}
	if l.out != nil {
		l.outFlow(f)
	} else if f.Echo {
		l.writeFlow(false)
	}
}

// writeFlow sends a flow for l with its current credit.
func (l *link) writeFlow(drain bool) {
	f := l.s.flow()
	h := l.handle
	f.Handle = &h
	var dc, credit uint32
	if l.out != nil {
		dc, credit = l.out.deliveryCount, l.out.credit
	} else {
		dc, credit = l.in.deliveryCount, l.in.credit
	}
	f.DeliveryCount = &dc
	f.LinkCredit = &credit
	f.Drain = drain
	l.s.c.write(l.s.ch, f)
}

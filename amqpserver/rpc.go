package amqpserver

import (
	"encoding/binary"
	"strings"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
)

// Request/response nodes ($cbs and <entity>/$management): the client
// sends requests on a link whose target is the node and receives replies
// on a link whose source is the node. Replies are routed by the request's
// reply-to (amqp.md §2.1).

// managementRequest hands a complete $management request to the
// management handler in a helper goroutine and routes its reply.
func (l *link) managementRequest(p *partial) {
	req, err := frames.UnmarshalMessage(p.buf)
	if err != nil {
		l.settleIncoming(p, &frames.Rejected{Error: errorf(frames.CondDecodeError, "%v", err)})
		return
	}
	c := l.s.c
	s := l.s
	entity := l.entity
	if r := c.replyLink(s, entity+mgmtSuffix, replyToOf(req)); r != nil && r.out.replyBacklog >= c.srv.cfg.Limits.MaxQueuedReplies {
		l.settleIncoming(p, &frames.Rejected{Error: errorf(frames.CondResourceLimitExceeded,
			"%d replies are waiting for the client on link '%s'. Read them before sending more requests.", r.out.replyBacklog, r.name)})
		return
	}
	l.acceptRequest(p)
	ct, failure := c.mgmtTxn(p, req)
	if failure != nil {
		c.routeReply(s, entity+mgmtSuffix, req, failure)
		return
	}
	var txn *core.Txn
	if ct != nil {
		txn = ct.t
	}
	rights := c.auth.rights(l.address)
	linkSession := c.associatedSession(entity, req)
	// Requests in flight count against the request link's credit
	// (maxInflight), which bounds the helpers one link can keep busy.
	l.in.inflight++
	// The request takes effect after the sends and settlements that came
	// before it on the connection (owed.go): uamqp defers a message and
	// asks for it by sequence number without waiting for the defer's
	// answer, and must find it deferred.
	c.submitPending()
	start := func(pay func()) {
		if c.ctx.Err() != nil {
			pay()
			return // the connection ended while the request waited
		}
		c.goWork(func() {
			reply := c.srv.handleManagement(c.ctx, c, entity, rights, req, linkSession, txn)
			c.post(func() {
				l.in.inflight--
				l.grantCredit()
				if ct != nil && c.txns[string(ct.id)] == ct {
					c.armTxnTimer(ct)
				}
				if s.live() {
					c.routeReply(s, entity+mgmtSuffix, req, reply)
				}
				pay()
			})
		})
	}
	if ct == nil {
		c.afterOwed(func() { start(func() {}) })
		return
	}
	// An operation inside a transaction owes its answer: the discharge
	// of the transaction waits for it (coordinator.go).
	c.oweInTurn(func(ticket uint64) { start(func() { c.paid(ticket) }) })
}

// replyToOf returns a request's reply-to address, "" when it has none.
func replyToOf(req *frames.Message) string {
	if req.Properties == nil {
		return ""
	}
	return req.Properties.ReplyTo
}

// routeReply sends reply on the link of this connection the client
// receives replies on: the one whose target address is the request's
// reply-to, else the one named by reply-to, else the one in the same
// session whose source is the node. Replies with no such link are dropped.
func (c *conn) routeReply(s *session, node string, req, reply *frames.Message) {
	replyTo := replyToOf(req)
	l := c.replyLink(s, node, replyTo)
	if l == nil {
		c.log.Debug("no link for reply", zap.String("node", node), zap.String("reply-to", replyTo))
		return
	}
	if l.out.replyBacklog >= c.srv.cfg.Limits.MaxQueuedReplies {
		// Requests are refused before this point; $cbs requests are
		// answered here only while the client reads its replies.
		c.log.Warn("reply dropped: the client does not read its replies", zap.String("node", node),
			zap.String("link", l.name), zap.Int("waiting", l.out.replyBacklog))
		return
	}
	var b buffer.Buffer
	if err := reply.MarshalAMQP(&b); err != nil {
		c.log.Error("encoding reply", zap.String("node", node), zap.Error(err))
		return
	}
	l.out.replies = append(l.out.replies, b.Bytes())
	c.holdMem(b.Len()) // until written (memory.go)
	l.out.replyBacklog++
	l.sendReplies()
}

func (c *conn) replyLink(s *session, node, replyTo string) *link {
	isReply := func(l *link) bool { return l.out != nil && l.kind != nodeEntity && !l.detached }
	if replyTo != "" {
		for _, sess := range c.local {
			for _, l := range sess.links {
				if isReply(l) && l.peerTarget == replyTo {
					return l
				}
			}
		}
		for _, sess := range c.local {
			for _, l := range sess.links {
				if isReply(l) && l.name == replyTo {
					return l
				}
			}
		}
	}
	for _, l := range s.links {
		if isReply(l) && strings.EqualFold(strings.Trim(l.address, "/"), node) {
			return l
		}
	}
	return nil
}

// sendReplies sends queued replies, pre-settled, while there is credit.
func (l *link) sendReplies() {
	o := l.out
	for len(o.replies) > 0 && o.credit > 0 && !l.detached {
		reply := o.replies[0]
		o.replies[0] = nil
		o.replies = o.replies[1:]
		l.s.c.holdMem(-len(reply)) // counted as a transfer from here
		id := l.s.nextDeliveryID
		l.s.nextDeliveryID++
		o.credit--
		o.deliveryCount++
		tag := binary.BigEndian.AppendUint32(nil, o.deliveryCount)
		l.s.queueTransfer(&outTransfer{l: l, id: id, tag: tag, settled: true, payload: payload{head: reply}, reply: true})
	}
	if o.drain && len(o.replies) == 0 {
		l.finishDrain()
	}
}

// associatedSession returns the id of the session held by the receiver
// link of this connection that req names in associated-link-name, if that
// link is a session receiver on entity, else "". The Go SDK names its
// receiver link this way instead of sending session-id for peek
// (amqp.md §6.1).
func (c *conn) associatedSession(entity string, req *frames.Message) string {
	v, _ := appProperty(req, "associated-link-name")
	name, _ := v.(string)
	if name == "" {
		return ""
	}
	for _, s := range c.sessions {
		for _, l := range s.links {
			if l.name == name && l.out != nil && l.out.sess != nil && !l.detached && strings.EqualFold(l.entity, entity) {
				return l.out.sess.SessionID
			}
		}
	}
	return ""
}

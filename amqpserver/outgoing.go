package amqpserver

import (
	"context"
	"encoding/binary"
	"errors"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
)

// maxPullBatch caps the messages one core.Receive call takes for a link.
const maxPullBatch = 1000

// outLink is the state of a link the client receives on (we are the
// sender): entity receivers and the reply links of $cbs and $management.
type outLink struct {
	credit        uint32
	deliveryCount uint32
	drain         bool
	mode          core.ReceiveMode
	// cancelPull is set while a helper goroutine runs core.Receive for
	// the link; at most one runs at a time.
	cancelPull context.CancelFunc
	pullMax    int
	// settling counts deliveries of the link whose release, abandon
	// or other non-accept outcome is being applied: no pull starts
	// meanwhile, so messages they make available again are not
	// overtaken by later ones.
	settling int
	sess     *core.SessionLock // session receivers: the session held
	replies  [][]byte          // reply links: encoded replies waiting for credit
}

// outDelivery is a peek-locked message sent to the client and not yet
// settled by it.
type outDelivery struct {
	l      *link
	entity string
	token  core.LockToken
	sess   *core.SessionLock // the session it was received under, if any
}

// attachReceiver attaches a link the client receives entity messages on.
// rcv-settle-mode second is peek-lock; first is receive-and-delete
// (settled transfers), unless the client explicitly asked for unsettled
// transfers (snd-settle-mode unsettled), which is peek-lock settled by the
// client in one step.
func (l *link) attachReceiver(a *frames.Attach) {
	o := l.out
	o.mode = core.PeekLock
	if l.rcv == frames.ReceiverSettleModeFirst && l.snd != frames.SenderSettleModeUnsettled {
		o.mode = core.ReceiveAndDelete
	}
	if filter, ok := sessionFilter(a.Source); ok {
		l.attachSessionReceiver(a, filter)
		return
	}
	if e, err := l.s.c.srv.b.GetEntity(l.entity); err == nil && e.RequiresSession && !core.ParseAddress(l.entity).DeadLetter {
		l.refuse(a, errorf(frames.CondNotAllowed,
			"It is not possible for an entity that requires sessions to create a non-sessionful message receiver: '%s'.", l.entity))
		return
	}
	l.attach(a, nil)
}

// outFlow applies the client's flow to a link it receives on (§2.6.7):
// our credit is delivery-count(flow) + link-credit(flow) -
// delivery-count(ours).
func (l *link) outFlow(f *frames.Flow) {
	o := l.out
	if f.LinkCredit != nil {
		dc := uint32(0) // absent: our initial-delivery-count (§2.7.4)
		if f.DeliveryCount != nil {
			dc = *f.DeliveryCount
		}
		o.credit = linkCredit(dc, *f.LinkCredit, o.deliveryCount)
	}
	o.drain = f.Drain
	if f.Echo {
		l.writeFlow(false)
	}
	if l.kind != nodeEntity {
		l.sendReplies()
		return
	}
	if o.cancelPull != nil {
		// A pull is running: stop it if it may now take too much or the
		// client wants the link drained; pulled continues from there.
		if o.drain || uint32(o.pullMax) > o.credit {
			o.cancelPull()
		}
		return
	}
	l.pull()
}

// linkCredit is the credit a client's flow leaves us (§2.6.7): it allows
// deliveries up to its delivery-count plus its link-credit, and we have
// sent ours minus its delivery-count since the count it saw. Both counts
// are serial numbers (RFC 1982, modulo 2^32) and the credit an unsigned
// 32-bit number: a credit of 2^31 or more is as valid as any other. A
// delivery-count ahead of ours is not one we sent; the credit is then
// taken as given.
func linkCredit(flowCount, flowCredit, ourCount uint32) uint32 {
	unseen := ourCount - flowCount
	if int32(unseen) < 0 {
		return flowCredit
	}
	if unseen >= flowCredit {
		return 0
	}
	return flowCredit - unseen
}

// pull starts a helper that takes up to credit messages from the broker,
// waiting for them, unless one runs already. While draining it only
// takes what is available right now.
func (l *link) pull() {
	o := l.out
	c := l.s.c
	if l.detached || !l.attached || o.cancelPull != nil || o.settling > 0 {
		return
	}
	if o.credit == 0 {
		if o.drain {
			l.finishDrain()
		}
		return
	}
	ctx, cancel := context.WithCancel(c.ctx)
	if o.drain {
		cancel() // a receive with a done context takes only what is there
	}
	o.cancelPull = cancel
	o.pullMax = min(int(o.credit), maxPullBatch)
	opts := core.ReceiveOptions{Mode: o.mode, Max: o.pullMax, Session: o.sess}
	entity := l.entity
	c.goWork(func() {
		msgs, err := c.srv.b.Receive(ctx, entity, opts)
		cancel()
		if !c.post(func() { l.pulled(msgs, err) }) {
			c.srv.giveBack(entity, msgs, opts.Mode)
		}
	})
}

// pulled delivers what a pull returned and starts the next one.
func (l *link) pulled(msgs []*core.Message, err error) {
	o := l.out
	o.cancelPull = nil
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		l.s.c.giveBack(l.entity, msgs, o.mode)
		if !l.detached {
			l.detach(amqpError(err))
		}
		return
	}
	for i, m := range msgs {
		if l.detached || !l.s.live() || (o.credit == 0 && o.mode == core.PeekLock) {
			l.s.c.giveBack(l.entity, msgs[i:], o.mode)
			break
		}
		l.deliver(m)
	}
	if l.detached {
		return
	}
	if o.drain {
		l.finishDrain()
		return
	}
	l.pull()
}

// finishDrain uses up the remaining credit and tells the client so with
// flow(drain=true, link-credit=0) (amqp.md §8).
func (l *link) finishDrain() {
	o := l.out
	o.deliveryCount += o.credit
	o.credit = 0
	o.drain = false
	l.writeFlow(true)
}

// deliver sends one message to the client.
func (l *link) deliver(m *core.Message) {
	o := l.out
	peekLock := o.mode == core.PeekLock
	payload, err := encodeDelivery(m, peekLock)
	if err != nil {
		l.s.c.log.Error("encoding delivery", zap.String("entity", l.entity), zap.Int64("seq", m.SequenceNumber), zap.Error(err))
		l.s.c.giveBack(l.entity, []*core.Message{m}, o.mode)
		return
	}
	s := l.s
	id := s.nextDeliveryID
	s.nextDeliveryID++
	var tag []byte
	if peekLock {
		tag = lockTokenToDeliveryTag(m.LockToken)
		s.unsettled[id] = &outDelivery{l: l, entity: l.entity, token: m.LockToken, sess: o.sess}
	} else {
		tag = binary.BigEndian.AppendUint64(nil, uint64(m.SequenceNumber))
	}
	if o.credit > 0 {
		o.credit--
	}
	o.deliveryCount++
	l.sendPayload(id, tag, !peekLock, payload)
}

// sendPayload splits an encoded message into transfers that fit the
// peer's max-frame-size.
func (l *link) sendPayload(id uint32, tag []byte, settled bool, payload []byte) {
	// Room for the frame header and the transfer performative (at most
	// about 80 bytes with a 32-byte tag).
	const overhead = 128
	chunk := int(min(l.s.c.peerMaxFrame, 1<<20)) - overhead
	format := uint32(0)
	first := true
	for {
		n := min(len(payload), chunk)
		t := &frames.Transfer{Handle: l.handle, Settled: settled, More: n < len(payload), Payload: payload[:n]}
		if first {
			did := id
			t.DeliveryID, t.DeliveryTag, t.MessageFormat = &did, tag, &format
			first = false
		}
		l.s.sendTransfer(t)
		payload = payload[n:]
		if len(payload) == 0 {
			return
		}
	}
}

// releaseOut stops an outgoing link: its pull is cancelled (what it
// returns is given back), its message session closed, and its unsettled
// deliveries forgotten (their locks stay valid until they expire).
func (l *link) releaseOut() {
	o := l.out
	if o.cancelPull != nil {
		o.cancelPull()
	}
	for id, d := range l.s.unsettled {
		if d.l == l {
			delete(l.s.unsettled, id)
		}
	}
	if sl := o.sess; sl != nil {
		// Settlements already sent for its messages are applied first
		// (owed.go).
		o.sess = nil
		c, entity := l.s.c, l.entity
		c.afterOwed(func() { c.srv.closeSession(entity, sl) })
	}
}

// giveBack is [Server.giveBack] in a helper goroutine, for the
// connection goroutine, which must not wait for storage.
func (c *conn) giveBack(entity string, msgs []*core.Message, mode core.ReceiveMode) {
	if len(msgs) > 0 {
		c.goWork(func() { c.srv.giveBack(entity, msgs, mode) })
	}
}

// giveBack returns messages a link could not deliver: peek-locked ones
// are released (no delivery counted); received-and-deleted ones are gone,
// which is logged.
func (s *Server) giveBack(entity string, msgs []*core.Message, mode core.ReceiveMode) {
	if len(msgs) == 0 {
		return
	}
	if mode == core.ReceiveAndDelete {
		s.log.Warn("received-and-deleted messages could not be delivered", zap.String("entity", entity), zap.Int("count", len(msgs)))
		return
	}
	for _, m := range msgs {
		// A release only fails when the lock is gone already; either way
		// the message is available again.
		_ = s.b.Settle(context.Background(), entity, m.LockToken, core.Outcome{Kind: core.Release})
	}
}

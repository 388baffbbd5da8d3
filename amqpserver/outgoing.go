package amqpserver

import (
	"bytes"
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
	// pulling is set while a helper takes messages for the link (and, in
	// receive-and-delete mode, removes those that fit): at most one at a
	// time. cancelPull stops its receive; pullMax is what it may take.
	pulling    bool
	cancelPull context.CancelFunc
	pullMax    int
	// settling counts deliveries of the link whose release, abandon
	// or other non-accept outcome is being applied: no pull starts
	// meanwhile, so messages they make available again are not
	// overtaken by later ones.
	settling int
	// unsettled counts the link's peek-locked deliveries the client has
	// not settled (Limits.MaxUnsettledPerLink).
	unsettled int
	// needFrames and needBytes are the window and delivery-buffer room
	// the message last given back for lack of room needs: the link
	// pulls again once there is that much.
	needFrames uint32
	needBytes  int
	// waiting is set while the link is on its session's or connection's
	// list of links waiting for room (waitForRoom).
	waiting bool
	// drainPulled is set once a drain has had its pull: the drain ends
	// when that pull's deliveries are out.
	drainPulled bool
	// removing holds receive-and-delete batches being removed from the
	// entity, in the order they were taken: each is sent once it and
	// those before it are removed (completeRAD).
	removing []*radBatch
	sess     *core.SessionLock // session receivers: the session held
	// replies are encoded replies of a reply link waiting for credit;
	// replyBacklog counts them and those not yet written
	// (Limits.MaxQueuedReplies).
	replies      [][]byte
	replyBacklog int
}

// outDelivery is a peek-locked message sent to the client and not yet
// settled by it.
type outDelivery struct {
	l       *link
	entity  string
	token   core.LockToken
	seq     int64             // the message's sequence number
	sess    *core.SessionLock // the session it was received under, if any
	written bool              // every frame of its transfer is written
}

// pulledMsg is a message a pull took, encoded for the link.
type pulledMsg struct {
	token   core.LockToken
	seq     int64
	payload payload
}

// attachReceiver attaches a link the client receives entity messages on.
// rcv-settle-mode second is peek-lock; first is receive-and-delete
// (settled transfers), unless the client explicitly asked for unsettled
// transfers (snd-settle-mode unsettled), which is peek-lock settled by the
// client in one step.
func (l *link) attachReceiver(a *frames.Attach) {
	if _, ok := jmsSelector(a.Source.Filter); ok {
		// Only a JMS topic consumer's selector is served (jms.go), as
		// its subscription's filter.
		l.refuse(a, errorf(frames.CondNotImplemented,
			"Message selectors are supported on topic consumers only: '%s' cannot be received from selectively.", l.entity))
		return
	}
	o := l.out
	o.mode = core.PeekLock
	if l.rcv == frames.ReceiverSettleModeFirst && l.snd != frames.SenderSettleModeUnsettled {
		o.mode = core.ReceiveAndDelete
	}
	if filter, ok := sessionFilter(a.Source); ok {
		l.attachSessionReceiver(a, filter)
		return
	}
	if e, err := l.s.c.broker().GetEntity(l.entity); err == nil && e.RequiresSession && !core.ParseAddress(l.entity).DeadLetter {
		l.refuse(a, errorf(frames.CondNotAllowed,
			"It is not possible for an entity that requires sessions to create a non-sessionful message receiver: '%s'.", l.entity))
		return
	}
	l.attach(a, nil)
}

// outFlow applies the client's flow to a link it receives on (§2.6.7).
func (l *link) outFlow(f *frames.Flow) {
	o := l.out
	if f.LinkCredit != nil {
		dc := uint32(0) // absent: our initial-delivery-count (§2.7.4)
		if f.DeliveryCount != nil {
			dc = *f.DeliveryCount
		}
		o.credit = linkCredit(dc, *f.LinkCredit, o.deliveryCount)
	}
	if f.Drain && !o.drain {
		o.drainPulled = false
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

// pull starts a helper that takes messages for the link, unless one runs
// already. It takes no more than the link's credit, the room in the
// client's session window, the room under the unsettled cap and in the
// connection's delivery buffer allow: a message is locked only when its
// transfer can be written now. While draining it takes only what is
// available right now.
func (l *link) pull() {
	o := l.out
	s := l.s
	c := s.c
	if l.detached || !l.attached || o.pulling || o.settling > 0 {
		return
	}
	if o.waiting {
		l.blocked() // a drain need not wait for the room
		return
	}
	if o.credit == 0 {
		if o.drain {
			l.finishDrain()
		}
		return
	}
	lim := &c.srv.cfg.Limits
	room := maxPullBatch
	if o.mode == core.PeekLock {
		room = min(room, lim.MaxUnsettledPerLink-o.unsettled)
		if room <= 0 {
			l.blocked() // settlements wake it (settleOut)
			return
		}
	}
	free := s.windowFree()
	if free == 0 || (o.needFrames > 0 && !s.fits(o.needFrames)) {
		l.waitForRoom(&s.windowWaiters)
		return
	}
	bufRoom := int(min(int64(lim.MaxDeliveryBuffer-c.outBytes), c.srv.cfg.Memory.Available()))
	if c.outBytes > 0 && (bufRoom <= 0 || o.needBytes > bufRoom) {
		// The connection's own writes wake it (wakeBuffer); with
		// nothing of its own left to write it takes one message
		// whatever the budget holds.
		l.waitForRoom(&c.bufferWaiters)
		return
	}
	n := int(min(o.credit, free, uint32(room)))
	maxBytes := max(1, int(min(int64(bufRoom), int64(free)*int64(c.chunk()))))

	ctx, cancel := context.WithCancel(c.ctx)
	if o.drain {
		cancel() // a receive with a done context takes only what is there
		o.drainPulled = true
	}
	o.pulling, o.cancelPull, o.pullMax = true, cancel, n
	opts := core.ReceiveOptions{Mode: core.PeekLock, Max: n, MaxBytes: maxBytes, Session: o.sess}
	entity, lockAnnotations := l.entity, o.mode == core.PeekLock
	c.goWork(func() {
		msgs, err := c.broker().Receive(ctx, entity, opts)
		cancel()
		batch, failed := encodePulled(msgs, lockAnnotations)
		if len(failed) > 0 {
			c.log.Error("encoding deliveries", zap.String("entity", entity), zap.Int("count", len(failed)), zap.Error(failed[0].err))
			c.release(entity, tokensOf(failed))
		}
		if !c.postHere(func() { l.pulled(batch, err) }) {
			c.release(entity, tokensOfPulled(batch))
		}
	})
}

// blocked ends a drain the link cannot serve now: the client learns
// there is nothing more for its credit.
func (l *link) blocked() {
	if l.out.drain {
		l.out.drainPulled = true
		l.pullNext()
	}
}

// waitForRoom puts the link on a list of links waiting for window or
// buffer room (wakeWaiters empties it).
func (l *link) waitForRoom(list *[]*link) {
	l.out.waiting = true
	*list = append(*list, l)
	l.blocked()
}

// wakeWaiters lets the links of list pull again.
func wakeWaiters(list *[]*link) {
	ls := *list
	*list = nil
	for _, l := range ls {
		l.out.waiting = false
		l.pull()
	}
}

// encodeFailure is a message that could not be encoded.
type encodeFailure struct {
	token core.LockToken
	err   error
}

// encodePulled encodes messages for delivery. The messages are not kept:
// only the encoded transfer payloads are, each sharing its body with its
// message, not copied (deliveryScratch.encode). The encoded sections (each payload's
// head) of consecutive messages share an allocation of about
// sharedHeads bytes, where each had one of its own: they are encoded one
// after the other into one scratch and copied out together.
func encodePulled(msgs []*core.Message, lockAnnotations bool) ([]pulledMsg, []encodeFailure) {
	batch := make([]pulledMsg, 0, len(msgs))
	var failed []encodeFailure
	sc := deliveryScratches.Get().(*deliveryScratch)
	defer sc.release()
	copied := 0 // batch[copied:] have their heads in sc.out, not yet copied out
	for i, m := range msgs {
		sc.next()
		start := sc.out.Len()
		body, err := sc.encode(m, lockAnnotations)
		if err != nil {
			sc.out.Truncate(start)
			failed = append(failed, encodeFailure{m.LockToken, err})
		} else {
			head := sc.out.Bytes()[start:]
			batch = append(batch, pulledMsg{token: m.LockToken, seq: m.SequenceNumber, payload: payload{head: head, body: body}})
		}
		msgs[i] = nil
		if sc.out.Len() >= sharedHeads || i == len(msgs)-1 {
			copyHeads(batch[copied:], sc.out.Bytes())
			copied = len(batch)
			sc.out.Reset()
		}
	}
	return batch, failed
}

// sharedHeads is how many bytes of encoded sections encodePulled gathers
// before it copies them out into one allocation: about eight deliveries'
// of 1 KiB, and half what a pooled scratch keeps (maxKeptScratch), so
// that the scratch stays in the pool.
const sharedHeads = maxKeptScratch / 2

// copyHeads gives the payloads of batch, whose heads are consecutive in
// enc (they alias it), a copy of enc of their own to share.
func copyHeads(batch []pulledMsg, enc []byte) {
	own := bytes.Clone(enc)
	for i := range batch {
		n := len(batch[i].payload.head)
		batch[i].payload.head, own = own[:n:n], own[n:]
	}
}

func tokensOf(failed []encodeFailure) []core.LockToken {
	toks := make([]core.LockToken, len(failed))
	for i, f := range failed {
		toks[i] = f.token
	}
	return toks
}

func tokensOfPulled(batch []pulledMsg) []core.LockToken {
	toks := make([]core.LockToken, len(batch))
	for i, pm := range batch {
		toks[i] = pm.token
	}
	return toks
}

// pulled delivers what a pull took, as far as the credit, the window and
// the delivery buffer still allow; the rest is released as if never
// delivered. In receive-and-delete mode the messages that fit are removed
// first (completeRAD), with their window room reserved.
func (l *link) pulled(batch []pulledMsg, err error) {
	o := l.out
	s := l.s
	c := s.c
	o.pulling, o.cancelPull = false, nil
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		l.giveBack(batch)
		if !l.detached {
			l.detach(detachError(err))
		}
		return
	}
	lim := &c.srv.cfg.Limits
	n := 0
	for ; n < len(batch); n++ {
		pm := &batch[n]
		if l.detached || !s.live() || o.credit == 0 ||
			(o.mode == core.PeekLock && o.unsettled >= lim.MaxUnsettledPerLink) {
			break
		}
		frames := c.framesFor(pm.payload.len())
		if !s.fits(frames) {
			o.needFrames = frames
			break
		}
		if c.outBytes > 0 && (c.outBytes+pm.payload.len() > lim.MaxDeliveryBuffer || int64(pm.payload.len()) > c.srv.cfg.Memory.Available()) {
			o.needBytes = pm.payload.len()
			break
		}
		o.needFrames, o.needBytes = 0, 0
		o.credit--
		o.deliveryCount++
		if o.mode == core.ReceiveAndDelete {
			s.reserved += frames
			c.holdOut(pm.payload.len())
			continue
		}
		l.deliver(pm)
	}
	if n < len(batch) {
		l.giveBack(batch[n:])
	}
	if o.mode == core.ReceiveAndDelete && n > 0 {
		l.completeRAD(batch[:n])
	}
	l.pullNext()
}

// pullNext continues after a pull: the next pull starts, or a drain
// whose pull is done and whose deliveries are out ends.
func (l *link) pullNext() {
	o := l.out
	if l.detached {
		return
	}
	if o.drain && o.drainPulled {
		if !o.pulling && o.settling == 0 && len(o.removing) == 0 {
			l.finishDrain()
		}
		return
	}
	l.pull()
}

// radBatch is a receive-and-delete batch being removed from its entity.
type radBatch struct {
	msgs []pulledMsg
	errs []error // nil until the removal is done
}

// completeRAD removes the receive-and-delete messages batch, which have
// their credit taken and their window room reserved, and sends them once
// the removal is durable (the broker's promise for receive-and-delete: a
// message is gone before it is handed out). The next pull need not wait:
// batches are sent in the order they were taken. A detach waits for the
// removal (owed.go).
func (l *link) completeRAD(msgs []pulledMsg) {
	o := l.out
	c := l.s.c
	rb := &radBatch{msgs: msgs}
	o.removing = append(o.removing, rb)
	entity := l.entity
	toks := tokensOfPulled(msgs)
	ticket := c.owe()
	c.goWork(func() {
		errs := c.broker().CompleteMany(entity, toks, true)
		c.postHere(func() {
			rb.errs = errs
			l.radRemoved()
			c.paid(ticket)
		})
	})
}

// radRemoved sends the removed batches at the head of the link's list:
// the messages whose removal succeeded go out; the credit of the others,
// still in their entity, is taken back.
func (l *link) radRemoved() {
	o := l.out
	s := l.s
	c := s.c
	lost := 0
	var failed []core.LockToken
	for len(o.removing) > 0 && o.removing[0].errs != nil {
		rb := o.removing[0]
		o.removing[0] = nil
		o.removing = o.removing[1:]
		for i := range rb.msgs {
			pm := &rb.msgs[i]
			s.reserved -= c.framesFor(pm.payload.len())
			c.holdOut(-pm.payload.len())
			switch {
			case rb.errs[i] != nil:
				o.credit++
				o.deliveryCount--
				failed = append(failed, pm.token)
			case l.detached || !s.live():
				lost++
			default:
				l.sendSettled(pm)
			}
		}
	}
	if len(o.removing) == 0 {
		o.removing = nil
	}
	if len(failed) > 0 {
		c.giveBackTokens(l.entity, failed...)
	}
	if lost > 0 {
		c.log.Warn("received-and-deleted messages could not be delivered: the link went away while they were removed",
			zap.String("entity", l.entity), zap.Int("count", lost))
	}
	s.wakeRoom()
	l.pullNext()
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

// deliver sends one peek-locked message to the client; its credit is
// already taken. The delivery tag is the lock token.
func (l *link) deliver(pm *pulledMsg) {
	s := l.s
	id := s.nextDeliveryID
	s.nextDeliveryID++
	// One allocation for the transfer, its unsettled entry and its tag,
	// three before. The entry outlives the transfer (until the client
	// settles); the payload does not (pump lets it go once written).
	ld := &lockedDelivery{
		od: outDelivery{l: l, entity: l.entity, token: pm.token, seq: pm.seq, sess: l.out.sess},
		tr: outTransfer{l: l, id: id, payload: pm.payload},
	}
	ld.tr.od = &ld.od
	ld.tr.tag = appendDeliveryTag(ld.tag[:0], pm.token)
	s.unsettled[id] = &ld.od
	l.out.unsettled++
	s.queueTransfer(&ld.tr)
}

// lockedDelivery is a peek-locked delivery: its unsettled entry, its
// transfer and the bytes of its tag.
type lockedDelivery struct {
	od  outDelivery
	tr  outTransfer
	tag [16]byte
}

// sendSettled sends one received-and-deleted message; its credit is
// already taken. The delivery tag is its sequence number.
func (l *link) sendSettled(pm *pulledMsg) {
	s := l.s
	id := s.nextDeliveryID
	s.nextDeliveryID++
	tag := binary.BigEndian.AppendUint64(nil, uint64(pm.seq))
	s.queueTransfer(&outTransfer{l: l, id: id, tag: tag, settled: true, payload: pm.payload})
}

// giveBack releases pulled messages the link could not send (no delivery
// counted). The link pulls no more until they are back in their entity,
// so they are not overtaken by later messages.
func (l *link) giveBack(batch []pulledMsg) {
	if len(batch) == 0 {
		return
	}
	o := l.out
	c := l.s.c
	toks := tokensOfPulled(batch)
	o.settling++
	entity := l.entity
	c.goWork(func() {
		c.release(entity, toks)
		c.postHere(func() {
			if o.settling--; o.settling == 0 {
				l.pullNext()
			}
		})
	})
}

// releaseOut stops an outgoing link: its pull is cancelled (what it
// returns is given back), deliveries not yet written whole are dropped
// and released, its message session closed, and its unsettled deliveries
// forgotten (their locks stay valid until they expire).
func (l *link) releaseOut() {
	o := l.out
	s := l.s
	if o.cancelPull != nil {
		o.cancelPull()
	}
	s.purge(l)
	for id, d := range s.unsettled {
		if d.l == l {
			delete(s.unsettled, id)
		}
	}
	o.unsettled = 0
	l.dropReplies()
	if l.jms != nil {
		s.c.srv.jms.release(s.c, l.jms.path())
	}
	if sl := o.sess; sl != nil {
		// Settlements already sent for its messages are applied first
		// (owed.go).
		o.sess = nil
		c, entity := s.c, l.entity
		c.afterOwed(func() { c.closeSession(entity, sl) })
	}
}

// giveBackTokens is [conn.release] in a helper goroutine, for the
// connection goroutine, which must not wait for storage.
func (c *conn) giveBackTokens(entity string, toks ...core.LockToken) {
	if len(toks) > 0 {
		c.goWork(func() { c.release(entity, toks) })
	}
}

// release returns peek-locked messages a link could not deliver, as if
// never delivered (no delivery counted).
func (c *conn) release(entity string, toks []core.LockToken) {
	for _, tok := range toks {
		// A release only fails when the lock is gone already; either way
		// the message is available again.
		_ = c.broker().Settle(context.Background(), entity, tok, core.Outcome{Kind: core.Release})
	}
}

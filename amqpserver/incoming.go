package amqpserver

import (
	"bytes"

	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
)

// Credit the server keeps outstanding on links the client sends on: a
// client may pipeline this many deliveries, which the store then commits
// in groups. Credit is topped up when it falls below creditLow, unless
// maxInflight deliveries are still being processed (backpressure).
const (
	creditWindow = 2000
	creditLow    = creditWindow / 2
	maxInflight  = 4 * creditWindow
)

// Limits of a sendBatch: beyond them it goes to the broker at once.
const (
	maxSendBatch      = 256
	maxSendBatchBytes = 1 << 20
)

// sendBatch is the deliveries a link completed in one pass of the
// connection loop, waiting to go to the broker together.
type sendBatch struct {
	parts []*partial
	msgs  []*core.Message // the messages of every part, in order
	ends  []int           // ends[i]: len(msgs) after parts[i]'s messages
	bytes int             // encoded size of the parts
}

// reserve gives an empty b room for n deliveries and their messages, so
// that a batch of n grows by no append: grown from nothing, its three
// slices took about three allocations (and copies) per doubling, some
// twenty for a batch of forty.
func (b *sendBatch) reserve(n int) {
	if b.parts != nil || n <= 1 {
		return
	}
	b.parts = make([]*partial, 0, n)
	b.msgs = make([]*core.Message, 0, n)
	b.ends = make([]int, 0, n)
}

// add appends delivery p, whose messages were decoded onto b.msgs
// (appendMessages) to make msgs.
func (b *sendBatch) add(p *partial, msgs []*core.Message) {
	b.parts = append(b.parts, p)
	b.msgs = msgs
	b.ends = append(b.ends, len(b.msgs))
	b.bytes += len(p.buf)
}

// inLink is the state of a link the client sends on (we are the receiver).
type inLink struct {
	credit        uint32
	deliveryCount uint32
	maxSize       uint64   // largest delivery accepted, in bytes
	cur           *partial // delivery being assembled across transfers
	inflight      int      // deliveries queued or sent, not yet answered
	batch         sendBatch
	lastBatch     int  // deliveries in the batch submitted last: room the next one reserves
	queued        bool // the link is in conn.senders
	sending       int  // SendAsync calls in flight (see hold)
	// partitioned is the description, read at attach, of the entity the
	// link stores into when that entity is partitioned, nil otherwise:
	// a batch sent to it must have one partition key (checkBatch).
	partitioned *core.Entity
}

// partial is an incoming delivery whose transfers are still arriving.
type partial struct {
	id      uint32
	settled bool
	format  uint32
	state   frames.DeliveryState // the client's delivery state (transactional-state in a transaction)
	// buf is the whole delivery once its last frame arrived. Until then
	// the payloads of its frames wait in chunks (each frame is a fresh
	// slice from the reader), so a large message is copied once, into a
	// buffer of its exact size, instead of through a growing one.
	buf    []byte
	chunks [][]byte
	size   int // bytes of the delivery so far
	// oversize is set once the delivery went beyond maxSize: it has been
	// rejected, and its bytes, and those of its later frames, are dropped.
	oversize bool
	// assembling is the bytes of buf counted in conn.inPartial: those of
	// a delivery whose last frame has not arrived.
	assembling int
}

// propMaxBatchSize is the sender-attach property that tells the SDKs how
// large a batch may be (the Go SDK since v1.11 sizes batches from it,
// before max-message-size).
const propMaxBatchSize = encoding.Symbol("com.microsoft:max-message-batch-size")

// maxBatchSize is Service Bus's limit on a batch (Premium's; a
// large-message entity takes messages up to 100 MB, but batches only up
// to this).
const maxBatchSize = 1 << 20

// attachSender attaches a link the client sends messages on. The maximum
// message size is the entity's, capped by the server's; the batch size
// the attach announces is the same, at most maxBatchSize.
func (l *link) attachSender(a *frames.Attach) {
	srv := l.s.c.srv
	l.in.maxSize = srv.cfg.MaxMessageSize
	d, err := l.s.c.broker().GetEntity(l.entity)
	if err == nil && d.MaxMessageSizeInKilobytes > 0 {
		l.in.maxSize = min(l.in.maxSize, uint64(d.MaxMessageSizeInKilobytes)*1024)
	}
	props, e := l.attachSendVia(a)
	if e != nil {
		l.refuse(a, e)
		return
	}
	if l.sendTo != "" {
		d, err = l.s.c.broker().GetEntity(l.sendTo)
	}
	if err == nil && d.EnablePartitioning {
		l.in.partitioned = d
	}
	l.attach(a, append(encoding.Map{{Key: propMaxBatchSize, Value: min(l.in.maxSize, maxBatchSize)}}, props...))
}

// grantCredit tops the link credit up to creditWindow when it is low and
// the link is not overloaded.
func (l *link) grantCredit() {
	in := l.in
	if l.detached || in.credit >= creditLow || in.inflight >= maxInflight {
		return
	}
	in.credit = creditWindow
	l.writeFlow(false)
}

// handleTransfer takes one transfer frame from the client.
func (s *session) handleTransfer(t *frames.Transfer) error {
	if !s.received() {
		return nil
	}
	l := s.links[t.Handle]
	if l == nil {
		if _, ok := s.awaiting[t.Handle]; !ok {
			s.end(errorf(frames.CondUnattachedHandle, "transfer on unattached handle %d", t.Handle))
		}
		return nil // in flight when we detached; dropped
	}
	if l.in == nil {
		s.end(errorf(frames.CondNotAllowed, "transfer on link %q, which the client receives on", l.name))
		return nil
	}
	if l.detached {
		return nil // in flight when we detached; dropped
	}
	in := l.in
	if in.cur == nil {
		if t.DeliveryID == nil {
			l.detach(errorf(frames.CondNotAllowed, "first transfer of a delivery without delivery-id"))
			return nil
		}
		if in.credit == 0 {
			l.detach(errorf(frames.CondTransferLimitExceeded, "transfer without link credit"))
			return nil
		}
		in.credit--
		in.deliveryCount++
		in.cur = &partial{id: *t.DeliveryID}
		if t.MessageFormat != nil {
			in.cur.format = *t.MessageFormat
		}
	}
	p := in.cur
	p.settled = p.settled || t.Settled
	if t.State != nil {
		p.state = t.State
	}
	if t.Aborted {
		l.dropPartial()
		l.grantCredit()
		return nil
	}
	if !p.oversize {
		c := s.c
		size := uint64(p.size) + uint64(len(t.Payload))
		switch {
		case size > in.maxSize:
			l.refuseOversize(p, size)
		case t.More && c.inPartial+len(t.Payload) > c.partialCap():
			l.detach(errorf(frames.CondResourceLimitExceeded,
				"The connection holds %d bytes of unfinished messages, the most it may hold (%d); finish or abort deliveries before starting others.",
				c.inPartial, c.partialCap()))
			return nil
		case p.size == 0 && !t.More:
			p.buf = t.Payload // single-frame delivery: no copy
			p.size = len(p.buf)
			c.holdIn(p.size)
		default:
			p.chunks = append(p.chunks, t.Payload)
			p.size += len(t.Payload)
			c.holdIn(len(t.Payload))
			if t.More {
				c.inPartial += len(t.Payload)
				p.assembling += len(t.Payload)
			}
		}
	}
	if t.More {
		return nil
	}
	in.cur = nil
	s.c.inPartial -= p.assembling
	p.assembling = 0
	p.join()
	l.delivered(p)
	l.grantCredit()
	return nil
}

// join makes buf the whole delivery from its chunks.
func (p *partial) join() {
	switch len(p.chunks) {
	case 0:
		return
	case 1:
		p.buf = p.chunks[0]
	default:
		// bytes.Join allocates without zeroing what it then overwrites:
		// make and append cleared a 64 KiB message's buffer first
		// (memclr was 8 % of a 64 KiB send's CPU, a third of it here).
		p.buf = bytes.Join(p.chunks, nil)
	}
	p.chunks = nil
}

// refuseOversize rejects delivery p as soon as its frames add up to more
// than the link's maximum message size, with Service Bus's condition and
// wording; the link stays attached. What was buffered is dropped, and so
// are the delivery's later frames, unread into memory.
func (l *link) refuseOversize(p *partial, size uint64) {
	c := l.s.c
	c.inPartial -= p.assembling
	c.received(p.size)
	p.oversize, p.buf, p.chunks, p.size, p.assembling = true, nil, nil, 0, 0
	l.settleIncoming(p, &frames.Rejected{Error: errorf(frames.CondMessageSizeExceeded,
		"The received message (delivery-id:%d, size:%d bytes) exceeds the limit (%d bytes) currently allowed on the link.",
		p.id, size, l.in.maxSize)})
}

// dropPartial forgets the delivery the link was assembling (aborted, or
// the link is going away).
func (l *link) dropPartial() {
	in := l.in
	if p := in.cur; p != nil {
		c := l.s.c
		c.inPartial -= p.assembling
		c.received(p.size)
	}
	in.cur = nil
}

// partialCap is the most bytes of unfinished deliveries a connection may
// hold: Limits.MaxIncomingBuffer, and at least one message of the largest
// size.
func (c *conn) partialCap() int {
	return max(c.srv.cfg.Limits.MaxIncomingBuffer, int(min(c.srv.cfg.MaxMessageSize, 1<<40)))
}

// delivered dispatches a complete incoming delivery by node kind. An
// oversize one was answered already.
func (l *link) delivered(p *partial) {
	if p.oversize {
		return
	}
	switch l.kind {
	case nodeCBS:
		l.s.c.received(len(p.buf))
		l.putToken(p)
	case nodeManagement:
		l.s.c.received(len(p.buf))
		l.managementRequest(p)
	case nodeCoordinator:
		l.coordinate(p)
	default:
		l.send(p)
	}
}

// received accounts for n bytes of incoming deliveries the connection no
// longer holds (answered, or handed to a request handler), and reopens
// the session windows it held back.
func (c *conn) received(n int) {
	c.holdIn(-n)
	if c.inBytes < c.srv.cfg.Limits.MaxIncomingBuffer {
		c.feedStarved()
	}
}

// feedStarved tops up the windows of the sessions that waited for room.
func (c *conn) feedStarved() {
	if len(c.starved) == 0 {
		return
	}
	ss := c.starved
	c.starved = nil
	for _, s := range ss {
		s.starved = false
		if s.live() {
			s.topUpWindow()
		}
	}
}

// send queues a delivery for the broker. The deliveries a link completes
// in one pass of the connection loop go to the broker together (see
// submitSends), so a burst of pipelined sends costs the broker one plan,
// one store write and one completion instead of one each; while the
// link's previous send is in flight, they wait for it (see hold).
func (l *link) send(p *partial) {
	if ts, ok := p.state.(*frames.TransactionalState); ok {
		l.sendInTxn(p, ts)
		return
	}
	in := l.in
	in.batch.reserve(in.lastBatch)
	msgs, err := appendMessages(in.batch.msgs, p.buf, p.format, &l.s.c.props)
	if err != nil {
		l.s.c.received(len(p.buf))
		l.settleIncoming(p, &frames.Rejected{Error: &frames.Error{Condition: frames.CondDecodeError, Description: err.Error()}})
		return
	}
	if err := l.checkBatch(p, msgs[len(in.batch.msgs):]); err != nil {
		clear(msgs[len(in.batch.msgs):]) // decoded onto the batch's spare room: drop them
		l.s.c.srv.stats.request(err, 1)
		l.s.c.received(len(p.buf))
		l.settleIncoming(p, &frames.Rejected{Error: amqpError(err)})
		return
	}
	in.inflight++
	l.queueSends()
	in.batch.add(p, msgs)
	if len(in.batch.msgs) >= maxSendBatch || in.batch.bytes >= maxSendBatchBytes {
		l.submitSends()
	}
}

// checkBatch refuses delivery p, whose messages are msgs, when it is a
// batch (the batched message format) that the link's entity does not take
// as one: on a partitioned entity, messages of distinct partition keys
// (core.CheckBatchKeys). Deliveries sent one by one are never refused for
// their keys, although send joins them into one broker send.
//
// The entity's settings are read at attach, as its maximum message size
// is, so the send path looks nothing up. Neither EnablePartitioning nor
// RequiresDuplicateDetection can change after an entity is created (an
// update that tries is refused); an entity deleted and created again
// under the same name with other settings applies to the links attached
// after it.
func (l *link) checkBatch(p *partial, msgs []*core.Message) error {
	if l.in.partitioned == nil || p.format != frames.MessageFormatBatch {
		return nil
	}
	return core.CheckBatchKeys(l.in.partitioned, msgs)
}

// queueSends puts the link in the connection's list of links with
// deliveries for the broker (conn.senders), once: it leaves the list
// when they are submitted.
func (l *link) queueSends() {
	if !l.in.queued {
		l.in.queued = true
		c := l.s.c
		c.senders = append(c.senders, l)
	}
}

// hold reports whether the link's queued deliveries should wait at the
// end of this pass: its previous send is still in flight. One group
// commit in flight per link, the next batch gathering meanwhile, makes
// the groups as large as the store's commit latency allows, whatever the
// client's writes look like: a client writing each transfer as it goes
// would otherwise have each pass's one or two deliveries committed on
// their own. A held batch goes to the broker at the end of the pass in
// which the send before it is answered (conn.endPass), when it reaches
// the batch limits (send), and at once before anything that must follow
// it: a detach, end or close, a discharge, a $management request, a
// drain, the connection's end (conn.submitPending). A client that waits
// for each answer before its next send never has a send held. The
// held deliveries count against the link's credit and the connection's
// incoming buffer as before; what holding adds is at most one commit's
// latency to a pipelined send.
func (l *link) hold() bool {
	return l.in.sending > 0
}

// submitSends hands the queued deliveries to the broker in one SendAsync.
// The broker assigns sequence numbers before SendAsync returns, so
// deliveries keep their order on the link, while the writes of successive
// batches are in flight together and the store group-commits them. The
// dispositions go out once the send is durable. If the joint send cannot
// be planned (one delivery holds a message the entity refuses), each
// delivery is sent on its own, in order, to get its own answer. A send is
// not cut short when the connection closes: it is either durable or
// failed, and the connection waits for it.
func (l *link) submitSends() {
	in := l.in
	b := in.batch
	in.batch = sendBatch{}
	if len(b.parts) > 0 {
		in.lastBatch = len(b.parts)
	}
	switch len(b.parts) {
	case 0:
		return
	case 1:
		l.sendAsync(b.parts, b.msgs)
		return
	}
	if !l.sendAsync(b.parts, b.msgs) {
		start := 0
		for i, end := range b.ends {
			l.sendAsync(b.parts[i:i+1], b.msgs[start:end])
			start = end
		}
	}
}

// sendAsync sends the messages of parts to the broker and settles parts
// with the outcome. It reports false, settling nothing, when the send of
// several deliveries could not be planned.
func (l *link) sendAsync(parts []*partial, msgs []*core.Message) bool {
	c := l.s.c
	c.work.Add(1)
	ticket := c.owe()
	err := c.broker().SendAsync(l.sendPath(), msgs, func(_ []int64, err error) {
		defer c.work.Done()
		c.postHere(func() {
			l.in.sending--
			l.sendsDone(parts, err)
			c.paid(ticket)
		})
	})
	if err == nil {
		l.in.sending++
		return true
	}
	c.work.Done()
	c.paid(ticket)
	if len(parts) > 1 {
		return false
	}
	l.sendsDone(parts, err)
	return true
}

// sendsDone answers deliveries whose send finished with err.
func (l *link) sendsDone(parts []*partial, err error) {
	var state frames.DeliveryState = &frames.Accepted{}
	if err != nil {
		state = &frames.Rejected{Error: amqpError(err)}
	}
	l.in.inflight -= len(parts)
	l.s.c.srv.stats.request(err, len(parts))
	n := 0
	for _, p := range parts {
		n += len(p.buf)
		l.settleIncoming(p, state)
	}
	l.s.c.received(n)
	l.grantCredit()
}

// settleIncoming answers an unsettled delivery with state, settled, as
// Service Bus answers every client's transfers whatever rcv-settle-mode
// its sender asked for: uamqp completes a send only on a settled
// disposition, and go-amqp and rhea take one in either mode. (The attach
// still echoes the mode asked for: go-amqp fails an attach that does not.)
// A client in mode second that settles the delivery afterwards is ignored
// (handleDisposition).
func (l *link) settleIncoming(p *partial, state frames.DeliveryState) {
	if p.settled || !l.s.live() {
		return
	}
	if _, ok := state.(*frames.Accepted); ok {
		l.s.queueAck(frames.RoleReceiver, p.id)
		return
	}
	l.s.c.write(l.s.ch, &frames.Disposition{
		Role:    frames.RoleReceiver,
		First:   p.id,
		Settled: true,
		State:   state,
	})
}

// acceptRequest accepts a complete $cbs or $management request at once,
// ahead of the acknowledgements queued for the end of the pass, so that
// the client hears its request settled before it hears the reply. uamqp
// (the Python SDK's AMQP stack) forgets a request when its reply comes;
// a settlement that arrives after that finds freed memory, and uamqp
// fails the operation or crashes (azure-uamqp-c's amqp_management).
func (l *link) acceptRequest(p *partial) {
	if p.settled || !l.s.live() {
		return
	}
	l.s.c.write(l.s.ch, &frames.Disposition{Role: frames.RoleReceiver, First: p.id, Settled: true, State: &frames.Accepted{}})
}

package core

import (
	"context"
	"encoding/hex"
	"sync"
	"time"

	"github.com/omnibusmq/omnibus/storage"
)

// The send path.
//
// A send assigns sequence numbers under the entity's inlet mutex, builds
// one storage batch for every record the send creates (bodies, state
// records, duplicate-detection history, forwarded copies), applies it with
// Sync outside any lock — concurrent sends are group-committed by the
// store — and only then makes the messages visible. Visibility follows
// sequence order: a send that becomes durable before an earlier one waits
// in the inlet's pending list until the earlier one is done, so a session
// or a FIFO reader never sees 5 before 4.

// inlet is the write side of a queue or topic.
type inlet struct {
	e *entity

	mu       sync.Mutex // guards the fields below; held while publishing
	next     int64      // next sequence number to assign
	reserved int64      // sequence numbers up to this are reserved
	durable  int64      // ... and up to this the reservation is durable
	pending  []*pendingSend
	dedup    dedupIndex
}

// seqBlock is how many sequence numbers one reservation record covers.
const seqBlock = 1 << 16

// pendingSend is one send's share of an inlet: the records it will make
// visible once durable.
type pendingSend struct {
	in       *inlet
	done     bool
	failed   bool
	reserve  int64    // the reservation this send wrote, 0 if none
	dedupIDs []string // message ids this send added to the history
	places   []placement
	quota    int64 // bytes reserved against the entity's quota (quota.go)
	n        int32 // messages assigned a sequence number (not duplicates), for stats
}

// placement is one record destined for one queue.
type placement struct {
	q *queue
	r *msgRec
}

// sendPlan collects everything one Send writes, across inlets (forwarding).
type sendPlan struct {
	b     *Broker
	now   int64
	batch storage.Batch
	// states are the plan's state records, added to batch after every
	// other record by ops: a batch that alternates body and state keys
	// makes the store's memtable search its whole skiplist for each,
	// where runs of increasing keys insert next to the one before.
	states storage.Batch
	sends  []*pendingSend
	seqs   []int64 // per top-level message: assigned sequence number, 0 if dropped
	owned  bool    // the caller gave up the messages: keep them, no copy
	move   bool    // a move within the broker (dead-letter forwarding): never refused for quota

	outbox  []plannedTransfers // transfers this plan adds to the outbox (transfer.go)
	applied []UUID             // transfer ids this plan applies (transfer_apply.go)
}

// maxForwardHops bounds auto-forwarding chains, like Service Bus's limit.
const maxForwardHops = 4

// Send enqueues msgs on the queue or topic at path and returns once they
// are durable. It returns the sequence numbers assigned, 0 for a message
// dropped as a duplicate. Messages with a future ScheduledEnqueueTime are
// stored as scheduled. The msgs are stamped in place with their broker
// properties.
func (b *Broker) Send(ctx context.Context, path string, msgs ...*Message) ([]int64, error) {
	if b.routed() {
		be, err := b.route(path)
		if err != nil {
			return nil, err
		}
		return be.Send(ctx, path, msgs...)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := b.planSend(path, msgs, false)
	if err != nil {
		return nil, err
	}
	// Durable on return: report success even if ctx ended meanwhile, or a
	// retrying client would store the messages twice.
	return p.seqs, p.commit()
}

// SendAsync is Send for pipelining fronts: sequence numbers are assigned
// before it returns, in call order, so messages sent one after the other
// on a link keep their order; the write to the store proceeds in the
// background, concurrently with later sends (which the store
// group-commits), and done is called once the messages are durable or the
// write failed. done runs on its own goroutine.
//
// A send that cannot be planned (no such entity, disabled, a message that
// may not go there) fails at once: SendAsync returns the error, nothing
// is written and done is not called. A front that joins the deliveries of
// several clients' calls into one SendAsync can then retry them one by
// one, still in order, to give each its own answer.
//
// SendAsync takes ownership of msgs: the broker may keep the messages and
// the memory they reference (bodies among it) instead of copying them, so
// the caller must not change or reuse either once SendAsync has returned
// nil (a refused send keeps nothing, so its messages may be sent again). A
// front that decodes each delivery into fresh memory loses
// nothing by this and saves a copy of every body.
func (b *Broker) SendAsync(path string, msgs []*Message, done func(seqs []int64, err error)) error {
	if b.routed() {
		be, err := b.route(path)
		if err != nil {
			return err
		}
		return be.SendAsync(path, msgs, done)
	}
	p, err := b.planSend(path, msgs, true)
	if err != nil {
		return err
	}
	b.run(func() {
		err := p.commit()
		if err != nil {
			done(nil, err)
			return
		}
		done(p.seqs, nil)
	})
	return nil
}

// planSend assigns sequence numbers and builds the batch of a send. With
// owned, the broker keeps msgs as they are rather than copies.
func (b *Broker) planSend(path string, msgs []*Message, owned bool) (*sendPlan, error) {
	e, err := b.sendTarget(path)
	if err != nil {
		return nil, err
	}
	p := &sendPlan{b: b, now: b.Now(), batch: storage.Batch{Sync: true}, owned: owned}
	p.seqs = make([]int64, len(msgs))
	if err := p.add(e, msgs, p.seqs, 0); err != nil {
		p.finish(true)
		return nil, err
	}
	return p, nil
}

// ops is the plan's batch with its state records last (see states). It
// moves them into batch, so it may be called more than once.
func (p *sendPlan) ops() *storage.Batch {
	p.batch.Ops = append(p.batch.Ops, p.states.Ops...)
	p.states.Ops = nil
	return &p.batch
}

// sendTarget resolves the queue or topic a send to path goes to.
func (b *Broker) sendTarget(path string) (*entity, error) {
	a := ParseAddress(path)
	if a.DeadLetter || a.Sub != "" {
		return nil, errf(CodeBadRequest, "cannot send to '%s': send to its queue or topic", a.String())
	}
	return b.lookup(a)
}

// commit makes a planned send durable and publishes it. A send holds no
// reservation (a write's, write.go): nothing in memory changes before
// finish publishes it, and a failed one publishes nothing.
func (p *sendPlan) commit() error {
	err := p.b.apply(p.ops())
	p.finish(err != nil)
	if err == nil {
		p.b.retryOrphans()
	}
	return err
}

// add plans msgs onto entity e. seqs, when non-nil, receives the sequence
// number of each message.
func (p *sendPlan) add(e *entity, msgs []*Message, seqs []int64, hops int) error {
	if e.parts != nil {
		return p.addPartitioned(e, msgs, seqs, hops)
	}
	d := e.desc.Load()
	if d.Kind == KindSubscription {
		return errf(CodeBadRequest, "cannot send to subscription '%s'", d.Path())
	}
	if d.Status == StatusDisabled || d.Status == StatusSendDisabled {
		return errf(CodeEntityDisabled, "Messaging entity '%s' is currently disabled for sending.", d.Path())
	}
	sizes := make([]measured, len(msgs))
	for i, m := range msgs {
		sizes[i] = measure(m)
		if err := checkSendable(d, m, sizes[i]); err != nil {
			return err
		}
	}
	e.touch(p.now)
	if d.ForwardTo != "" && d.Kind == KindQueue {
		t, err := p.forwardTarget(d, d.ForwardTo, hops)
		if err != nil {
			return err
		}
		if !d.RequiresDuplicateDetection {
			return p.addForwarded(e, t, msgs, seqs, hops+1)
		}
		return p.forwardUnique(e, d, t, msgs, seqs, hops)
	}

	in := e.in
	ps := &pendingSend{in: in}
	in.mu.Lock()
	in.dedup.evictLocked(p, e, d.DuplicateDetectionHistoryTimeWindow)
	assigned := make([]int64, len(msgs))
	for i, m := range msgs {
		if d.RequiresDuplicateDetection {
			id := m.MessageIDString()
			if in.dedup.seenLocked(p, e, id) {
				continue
			}
			ps.dedupIDs = append(ps.dedupIDs, id)
		}
		assigned[i] = in.next
		in.next++
		ps.n++
	}
	if in.next-1 > in.durable {
		// Every send that uses numbers beyond the durable reservation
		// writes the reservation, so whichever commits first covers all.
		for in.reserved < in.next-1 {
			in.reserved += seqBlock
		}
		ps.reserve = in.reserved
		p.batch.Set(idKey(tabSeq, e.id), u64(uint64(in.reserved)))
	}
	in.pending = append(in.pending, ps)
	in.mu.Unlock()
	p.sends = append(p.sends, ps)

	for i, m := range msgs {
		seq := assigned[i]
		if seqs != nil {
			seqs[i] = seq
		}
		if seq == 0 {
			continue
		}
		if err := p.place(e, d, ps, m, sizes[i], seq, hops); err != nil {
			return err
		}
	}
	return p.reserve(e, d, ps)
}

// forwardTarget resolves where d forwards to: an entity of this broker,
// or one of another data group (a transfer, transfer.go).
func (p *sendPlan) forwardTarget(d *Entity, target string, hops int) (transferTarget, error) {
	if hops >= maxForwardHops {
		return transferTarget{}, errf(CodeBadRequest, "'%s' forwards through more than %d entities", d.Path(), maxForwardHops)
	}
	a := ParseAddress(target)
	t, err := p.b.lookup(a)
	if err != nil {
		if g, lerr := p.b.locateElsewhere(a.Entity); lerr != nil {
			return transferTarget{}, lerr
		} else if g != 0 && !a.DeadLetter && a.Sub == "" {
			return transferTarget{group: g, name: a.Entity}, nil
		}
		return transferTarget{}, errf(CodeNotFound, "'%s' forwards to '%s', which does not exist", d.Path(), target)
	}
	return transferTarget{e: t}, nil
}

// place stamps m with its broker properties and plans its records: one
// state record on a queue, or one per matching subscription of a topic
// with the body stored once.
func (p *sendPlan) place(e *entity, d *Entity, ps *pendingSend, m *Message, ms measured, seq int64, hops int) error {
	now := p.now
	m.SequenceNumber = seq
	m.EnqueuedSequenceNumber = seq
	m.EnqueuedTime = time.Unix(0, now).UTC()
	m.State = StateActive
	m.DeliveryCount = 0
	if m.MessageID == nil || m.MessageID == "" {
		// Service Bus gives every message an id; clients (the JS SDK's
		// lock renewal among them) rely on one being there.
		id := NewUUID()
		var text [2 * len(id)]byte
		hex.Encode(text[:], id[:])
		m.MessageID = string(text[:])
		ms.size += len(text) // the id counts as the sender's would
		ms.record += len(text)
	}
	base := now
	if !m.ScheduledEnqueueTime.IsZero() && m.ScheduledEnqueueTime.UnixNano() > now && !p.b.cfg.Faults.IgnoreSchedule {
		m.State = StateScheduled
		base = m.ScheduledEnqueueTime.UnixNano()
		// A scheduled message is enqueued at its scheduled time: that is
		// its EnqueuedTime, and its TTL counts from it (seed 003).
		m.EnqueuedTime = time.Unix(0, base).UTC()
	}
	size := int32(ms.size)
	// From here on the broker keeps m in memory (the hand-over cache): use
	// a copy that shares nothing with the caller, who may reuse its
	// message and buffers once Send returns, unless the caller gave m up.
	if !p.owned {
		m = detach(m)
	}
	if d.Kind == KindQueue {
		ttl := effectiveTTL(m.TimeToLive, d.DefaultMessageTimeToLive)
		if ttl < MaxTimeToLive {
			m.TimeToLive = ttl // silently capped by the entity default (seed 003)
		}
		r := p.newRec(m, seq, e.id, base, ttl, size)
		// Both keys and both records share one allocation: the batch
		// only borrows them until the store has copied them. A large
		// body is left out of it: appendBody's append of the body then
		// allocates the record without zeroing the bytes it copies in
		// (make zeroes them first: a 64 KiB body's record was a fifth of
		// a 64 KiB send's zeroing), and the state record, if it does not
		// fit behind the body, gets a small allocation of its own.
		room := ms.record + maxStateRecLen + len(r.sessionID)
		if len(m.Body) >= largeBody {
			room = ms.record - len(m.Body)
		}
		buf := make([]byte, 0, 2*seqKeyLen+room)
		bodyKey := appendSeqKey(buf, tabBody, e.id, seq)
		stateKey := appendSeqKey(bodyKey[len(bodyKey):], tabState, e.q.id, seq)
		body, err := appendBody(stateKey[len(stateKey):], m)
		if err != nil {
			return err
		}
		p.batch.Set(bodyKey[:len(bodyKey):len(bodyKey)], body[:len(body):len(body)])
		// SetNew: seq was just assigned, so the record holds nothing yet
		// (a follower may then drop it with its deletion, coalesce.go).
		p.states.SetNew(stateKey[:len(stateKey):len(stateKey)], r.encode(body[len(body):]))
		ps.places = append(ps.places, placement{q: e.q, r: r})
		return nil
	}
	return p.fanOut(e, d, ps, m, seq, base, size, hops)
}

// largeBody is the body size from which a send's record is allocated
// by appending the body rather than zeroed first (place): Go zeroes
// allocations from 32 KiB in a pass of their own.
const largeBody = 32 << 10

// detach returns a copy of m sharing no memory with it.
func detach(m *Message) *Message {
	c := m.Clone()
	c.Body = append([]byte(nil), m.Body...)
	if m.UserID != nil {
		c.UserID = append([]byte(nil), m.UserID...)
	}
	if m.encoded() {
		c.EncodedProperties.Bytes = append([]byte(nil), m.EncodedProperties.Bytes...)
	}
	return c
}

func (p *sendPlan) newRec(m *Message, seq int64, owner uint64, base int64, ttl time.Duration, size int32) *msgRec {
	r := &msgRec{seq: seq, idx: -1, msg: m}
	r.state = m.State
	r.owner = owner
	r.expiresAt = expiry(base, ttl)
	if m.State == StateScheduled {
		r.scheduledAt = base
	}
	r.size = size
	r.sessionID = m.SessionID
	return r
}

// effectiveTTL applies the entity default as both default and cap.
func effectiveTTL(msgTTL, entityTTL time.Duration) time.Duration {
	if msgTTL <= 0 || msgTTL > entityTTL {
		return entityTTL
	}
	return msgTTL
}

// expiry returns base+ttl in unix nanos, 0 for "never" (and on overflow).
func expiry(base int64, ttl time.Duration) int64 {
	if ttl >= MaxTimeToLive || int64(ttl) > 1<<62 || base > (1<<63-1)-int64(ttl) {
		return 0
	}
	return base + int64(ttl)
}

// checkSendable refuses a message entity d may not take; ms is its
// [measure].
func checkSendable(d *Entity, m *Message, ms measured) error {
	if max := d.MaxMessageSizeInKilobytes * 1024; int64(ms.size) > max {
		return errf(CodeMessageTooLarge, "The received message (size %d bytes) exceeds the limit (%d bytes) of '%s'.", ms.size, max, d.Path())
	}
	if err := checkHeaderSize(ms.header); err != nil {
		return err
	}
	if d.Kind == KindQueue && d.RequiresSession && m.SessionID == "" {
		return errf(CodeBadRequest, "The SessionId was not set on a message, and it cannot be sent to the entity '%s'. Entities that have session support enabled can only receive messages that have the SessionId set to a valid value.", d.Path())
	}
	return checkKeys(m)
}

// checkKeys refuses a message whose session id and partition key Service
// Bus would refuse (partition.go): too long, or disagreeing.
func checkKeys(m *Message) error {
	if m.SessionID != "" && m.PartitionKey != "" && m.SessionID != m.PartitionKey {
		return errf(CodeBadRequest, "PartitionKey '%s' is not the same as SessionId '%s'; when both are set they must be equal.", m.PartitionKey, m.SessionID)
	}
	if len(m.SessionID) > MaxPartitionKeyLength {
		return errf(CodeBadRequest, "SessionId is longer than 128 characters")
	}
	if len(m.PartitionKey) > MaxPartitionKeyLength {
		return errf(CodeBadRequest, "PartitionKey '%s...' is longer than 128 characters", m.PartitionKey[:16])
	}
	if len(m.ViaPartitionKey) > MaxPartitionKeyLength {
		return errf(CodeBadRequest, "ViaPartitionKey '%s...' is longer than 128 characters", m.ViaPartitionKey[:16])
	}
	return nil
}

// addPartitioned plans msgs onto the partitions of e, each message to
// the partition its key picks (partition.go). The send is still one
// batch: all of it is stored or none.
func (p *sendPlan) addPartitioned(e *entity, msgs []*Message, seqs []int64, hops int) error {
	d := e.desc.Load()
	for _, m := range msgs {
		// The keys pick the partition: a bad one is refused before any
		// of the batch is planned (the rest is checked per partition).
		if err := checkKeys(m); err != nil {
			return err
		}
	}
	e.touch(p.now)
	if len(msgs) == 1 {
		part := e.pickPart(d, msgs[0])
		if err := checkHeldPart(d, part, hops); err != nil {
			return err
		}
		return p.add(e.parts[part], msgs, seqs, hops)
	}
	for part, at := range e.splitByPartition(d, msgs) {
		if len(at) == 0 {
			continue
		}
		if err := checkHeldPart(d, part, hops); err != nil {
			return err
		}
		sub := make([]*Message, len(at))
		for j, i := range at {
			sub[j] = msgs[i]
		}
		var subSeqs []int64
		if seqs != nil {
			subSeqs = make([]int64, len(at))
		}
		if err := p.add(e.parts[part], sub, subSeqs, hops); err != nil {
			return err
		}
		for j, i := range at {
			if seqs != nil {
				seqs[i] = subSeqs[j]
			}
		}
	}
	return nil
}

// finish marks the plan's sends done and publishes, in sequence order,
// every send whose predecessors are done too.
func (p *sendPlan) finish(failed bool) {
	p.finishTransfers(failed)
	now := p.b.Now()
	for _, ps := range p.sends {
		in := ps.in
		in.mu.Lock()
		ps.done = true
		ps.failed = failed
		if !failed && ps.reserve > in.durable {
			in.durable = ps.reserve
		}
		if !failed && !p.move {
			ps.noteSent(time.Duration(now - p.now))
		}
		if failed {
			in.dedup.forgetLocked(ps.dedupIDs, p.now)
		}
		n := 0
		for n < len(in.pending) && in.pending[n].done {
			in.pending[n].publish(now)
			n++
		}
		clear(in.pending[:n])
		in.pending = in.pending[n:]
		in.mu.Unlock()
	}
}

// publish makes a durable send's records visible. Called with in.mu held,
// which keeps publication in sequence order.
func (ps *pendingSend) publish(now int64) {
	defer ps.releaseQuota()
	if ps.failed {
		return
	}
	ps.noteIncoming()
	shared := len(ps.places) > 0 && ps.places[0].q.shared != nil
	if shared {
		// Every copy's reference counts before the first copy can be
		// received and completed.
		ps.in.e.addRefs(ps.places)
	}
	var dropped []int64
	// Consecutive records for the same queue (a batch) are all inserted
	// before waiters are served, so a receiver asking for many gets the
	// whole batch rather than its first message.
	for i := 0; i < len(ps.places); {
		q := ps.places[i].q
		q.mu.Lock()
		for ; i < len(ps.places) && ps.places[i].q == q; i++ {
			pl := ps.places[i]
			if q.mu.closed {
				if shared && q.mu.deleted && q.sharedBody(pl.r) {
					dropped = append(dropped, pl.r.seq) // a subscription deleted meanwhile
				}
				continue
			}
			if m := pl.r.msg; m != nil {
				pl.r.msg = nil
				q.cacheLocked(pl.r, m) // within the queue's and the broker's budgets (cache.go)
			}
			q.insertLocked(pl.r, now)
		}
		if !q.mu.closed {
			q.serveWaitersLocked(now)
		}
		q.mu.Unlock()
		q.kickExpiry()
	}
	if len(dropped) > 0 {
		ps.in.e.dropRefs(ps.places[0].q.b, dropped)
	}
}

func u64(v uint64) []byte {
	b := make([]byte, 8)
	for i := 7; i >= 0; i-- {
		b[i] = byte(v)
		v >>= 8
	}
	return b
}

// forwardUnique applies a forwarding queue's own duplicate detection before
// the messages move on to its target: a duplicate is dropped here, as it
// would be on a queue without ForwardTo. The source inlet keeps a pending
// send with no placements so a failed batch forgets the ids it recorded.
func (p *sendPlan) forwardUnique(e *entity, d *Entity, target transferTarget, msgs []*Message, seqs []int64, hops int) error {
	in := e.in
	ps := &pendingSend{in: in}
	var kept []*Message
	var at []int
	in.mu.Lock()
	in.dedup.evictLocked(p, e, d.DuplicateDetectionHistoryTimeWindow)
	for i, m := range msgs {
		id := m.MessageIDString()
		if in.dedup.seenLocked(p, e, id) {
			continue
		}
		ps.dedupIDs = append(ps.dedupIDs, id)
		kept = append(kept, m)
		at = append(at, i)
	}
	in.pending = append(in.pending, ps)
	in.mu.Unlock()
	p.sends = append(p.sends, ps)
	keptSeqs := make([]int64, len(kept))
	if err := p.addForwarded(e, target, kept, keptSeqs, hops+1); err != nil {
		return err
	}
	for j, i := range at {
		if seqs != nil {
			seqs[i] = keptSeqs[j]
		}
	}
	return nil
}

package core

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/storage"
)

// Transfers: forwarding to an entity of another group.
//
// A cluster with data groups runs one Broker per group (route.go), and a
// broker holds only its group's entities. Forwarding to an entity of its
// own group is what it always was: the forwarded copy is written in the
// same batch that accepts or moves the message. Forwarding to an entity
// of another group (ForwardTo of a queue or a subscription,
// ForwardDeadLetteredMessagesTo) cannot be one write, so it becomes a
// transfer:
//
//   - the source's write puts the message in the broker's outbox instead
//     of the target (a record 'T' target-group:8 number:8 holding a
//     transfer id unique per message and hop, the target's name, the hop
//     count, the source and the message): accepted or moved means in the
//     outbox, durably;
//   - a pump on the node serving the source group (cmd/omnibus/app,
//     cluster_transfer.go) takes the outbox of each target group in
//     order ([Broker.PendingTransfers]), hands it to the target group's
//     broker ([Broker.ApplyTransfers]) and deletes what was applied
//     ([Broker.Transferred]); it retries what failed for now, and a new
//     leader of the source group resumes the outbox it finds;
//   - the target applies a transfer at most once: the ids it applied are
//     kept (a record 'X' id:16 → time applied, written in the batch that
//     enqueues the message, checked before) for
//     [TransferConfig.DedupWindow] and at most [TransferConfig.DedupCount]
//     of them, so a transfer sent again because its answer was lost (a
//     leader killed between the target's write and the source's delete)
//     is dropped;
//   - a target that refuses a transfer for good (missing, disabled, full,
//     the message does not fit it) gets it no more: the source
//     dead-letters it in its own dead-letter subqueue, as Service Bus does
//     when an auto-forwarding target is disabled or over its quota
//     ([Broker.TransferRefused]).
//
// The outbox is bounded ([TransferConfig.MaxOutbox]): past it, a send
// that would add to it is refused as server busy (retryable). A move
// (dead-letter forwarding) is never refused, as it is never refused for
// quota either.

const (
	tabOutbox  = 'T' // outbox: target-group:8 number:8 → transfer record
	tabApplied = 'X' // applied transfer ids: id:16 → applied at (unix nanos)
)

// Transfer bounds' defaults.
const (
	// DefaultMaxOutbox is how many transfers a group's outbox holds
	// before sends that would add to it are refused (server busy).
	DefaultMaxOutbox = 10000
	// DefaultTransferDedupCount is how many applied transfer ids a
	// group remembers at most.
	DefaultTransferDedupCount = 100000
	// DefaultTransferDedupWindow is how long a group remembers an
	// applied transfer id (unless DedupCount pushes it out sooner).
	DefaultTransferDedupWindow = time.Hour
)

// Dead-letter reasons of a transfer its target refused for good.
// Service Bus documents the move (the source dead-letters what its
// disabled or full target does not take) but not the reason; these are
// the names of the errors the target gave.
const (
	ReasonForwardNotFound = "MessagingEntityNotFound"
	ReasonForwardDisabled = "MessagingEntityDisabled"
	ReasonForwardQuota    = "QuotaExceeded"
	ReasonForwardRefused  = "ForwardingRefused"
)

// TransferConfig makes a broker one data group of several: forwarding
// to an entity the broker does not hold, but Locate finds in another
// group, goes by transfer.
type TransferConfig struct {
	// Group is this broker's data group (not 0 when Locate is set).
	Group uint64
	// Locate returns the data group of the queue or topic name, 0 when
	// it is placed nowhere. Nil: the broker is not part of a cluster
	// with groups, and forwards only to entities it holds.
	Locate func(ctx context.Context, name string) (uint64, error)
	// MaxOutbox bounds the outbox; 0 means DefaultMaxOutbox.
	MaxOutbox int
	// DedupCount and DedupWindow bound the applied transfer ids kept;
	// 0 means their defaults.
	DedupCount  int
	DedupWindow time.Duration
}

func (c *TransferConfig) setDefaults() {
	if c.MaxOutbox <= 0 {
		c.MaxOutbox = DefaultMaxOutbox
	}
	if c.DedupCount <= 0 {
		c.DedupCount = DefaultTransferDedupCount
	}
	if c.DedupWindow <= 0 {
		c.DedupWindow = DefaultTransferDedupWindow
	}
}

// Transfer is one message on its way to an entity of another group.
type Transfer struct {
	ID      UUID     // unique per message and hop
	Target  string   // the queue or topic it goes to
	Hops    int      // forwarding hops the message has made, this one included
	Message *Message // as the target is to enqueue it

	// Source side only.
	group  uint64 // target group
	num    uint64 // number in the outbox
	source string // the queue or subscription it left
	part   int    // the source's partition, -1 for none
}

// transfers is a broker's outbox and applied-id state.
type transfers struct {
	mu      sync.Mutex // guards the fields below; taken alone
	next    uint64     // next outbox number
	count   int        // outbox records, planned ones included
	planned map[uint64]bool
	wake    map[uint64]chan struct{} // by target group
	applied map[UUID]int64           // id → applied at; 0 while being applied
	order   []appliedID              // applied ids, oldest first
}

type appliedID struct {
	id UUID
	at int64
}

// transferTarget is where a forward goes: an entity this broker holds,
// or one of another group (group, name).
type transferTarget struct {
	e     *entity
	group uint64
	name  string
}

// locateElsewhere returns the group, other than this broker's, of the
// queue or topic name; 0 when it has none or it is this group's.
func (b *Broker) locateElsewhere(name string) (uint64, error) {
	tc := &b.cfg.Transfers
	if tc.Locate == nil || name == "" {
		return 0, nil
	}
	g, err := tc.Locate(context.Background(), name)
	if err != nil || g == tc.Group {
		return 0, err
	}
	return g, nil
}

// addForwarded plans msgs forwarded by src onto t: the target's records
// when this broker holds it, else transfers into the outbox (a move when
// p.move).
func (p *sendPlan) addForwarded(src *entity, t transferTarget, msgs []*Message, seqs []int64, hops int) error {
	if t.e != nil {
		return p.add(t.e, msgs, seqs, hops)
	}
	return p.addTransfers(src, t, msgs, hops)
}

// addTransfers plans msgs into the outbox for t, leaving src.
func (p *sendPlan) addTransfers(src *entity, t transferTarget, msgs []*Message, hops int) error {
	b := p.b
	x := &b.xfer
	source, part := src.desc.Load().Path(), -1
	if src.parent != nil {
		source, part = src.parent.desc.Load().Path(), src.part
	}
	x.mu.Lock()
	if !p.move && x.count+len(msgs) > b.cfg.Transfers.MaxOutbox {
		n := x.count
		x.mu.Unlock()
		return errf(CodeServerBusy, "'%s' forwards to '%s' in data group %d: this group's outbox holds %d transfers, and %d more would pass its bound (%d); retry",
			source, t.name, t.group, n, len(msgs), b.cfg.Transfers.MaxOutbox)
	}
	first := x.next
	x.next += uint64(len(msgs))
	x.count += len(msgs)
	if x.planned == nil {
		x.planned = map[uint64]bool{}
	}
	for i := range msgs {
		x.planned[first+uint64(i)] = true
	}
	x.mu.Unlock()
	p.outbox = append(p.outbox, plannedTransfers{group: t.group, first: first, n: len(msgs)})
	for i, m := range msgs {
		rec := encodeTransfer(NewUUID(), hops, part, t.name, source)
		rec, err := appendBody(rec, m)
		if err != nil {
			return err
		}
		p.batch.Set(outboxKey(t.group, first+uint64(i)), rec)
	}
	return nil
}

// plannedTransfers are outbox numbers a plan added.
type plannedTransfers struct {
	group uint64
	first uint64
	n     int
}

// finishTransfers ends the plan's share of the outbox and of the applied
// ids, once its write committed or failed.
func (p *sendPlan) finishTransfers(failed bool) {
	if len(p.outbox) == 0 && len(p.applied) == 0 {
		return
	}
	x := &p.b.xfer
	x.mu.Lock()
	var wake []chan struct{}
	for _, pt := range p.outbox {
		for i := 0; i < pt.n; i++ {
			delete(x.planned, pt.first+uint64(i))
		}
		if failed {
			x.count -= pt.n
		} else {
			wake = append(wake, x.wakeLocked(pt.group))
		}
	}
	for _, id := range p.applied {
		if failed {
			delete(x.applied, id)
			continue
		}
		x.applied[id] = p.now
		x.order = append(x.order, appliedID{id: id, at: p.now})
	}
	x.mu.Unlock()
	for _, c := range wake {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

func (x *transfers) wakeLocked(g uint64) chan struct{} {
	if x.wake == nil {
		x.wake = map[uint64]chan struct{}{}
	}
	c := x.wake[g]
	if c == nil {
		c = make(chan struct{}, 1)
		x.wake[g] = c
	}
	return c
}

// TransfersAdded returns a channel that receives (without blocking the
// sender: it holds one signal) when transfers to group g were added to
// the outbox. A pump waits on it between rounds.
func (b *Broker) TransfersAdded(g uint64) <-chan struct{} {
	b.xfer.mu.Lock()
	defer b.xfer.mu.Unlock()
	return b.xfer.wakeLocked(g)
}

// OutboxDepth is how many transfers b's outbox holds now (those of
// sends still being written included): what [TransferConfig.MaxOutbox]
// bounds.
func (b *Broker) OutboxDepth() int {
	b.xfer.mu.Lock()
	defer b.xfer.mu.Unlock()
	return b.xfer.count
}

// PendingTransfers returns, in order, up to max transfers (and about
// maxBytes of messages) waiting in the outbox for group g, stopping
// before the first whose write has not committed yet, so that a later
// one never overtakes it.
func (b *Broker) PendingTransfers(g uint64, max, maxBytes int) ([]*Transfer, error) {
	x := &b.xfer
	x.mu.Lock()
	limit := x.next
	for n := range x.planned {
		limit = min(limit, n)
	}
	x.mu.Unlock()
	var out []*Transfer
	size := 0
	err := b.store.Scan(idKey(tabOutbox, g), nil, func(k, v []byte) (bool, error) {
		if len(k) != 17 || binary.BigEndian.Uint64(k[9:]) >= limit {
			return false, nil
		}
		t, err := decodeTransfer(v)
		if err != nil {
			// It stays, and so do the transfers to g after it: skipping
			// it would lose a message (Broker.Check does not look here).
			b.log.Error("an outbox record does not decode; transfers to its group wait behind it",
				zap.Uint64("group", g), zap.Binary("key", k), zap.Error(err))
			return false, errf(CodeInternal, "outbox record %x: %v", k, err)
		}
		t.group, t.num = g, binary.BigEndian.Uint64(k[9:])
		out = append(out, t)
		size += len(v)
		return len(out) < max && size < maxBytes, nil
	})
	return out, err
}

// Transferred deletes from the outbox the transfers their target applied.
func (b *Broker) Transferred(ts []*Transfer) error {
	if len(ts) == 0 {
		return nil
	}
	batch := &storage.Batch{Sync: true}
	for _, t := range ts {
		batch.Delete(outboxKey(t.group, t.num))
	}
	if err := b.apply(batch); err != nil {
		return err
	}
	b.xfer.mu.Lock()
	b.xfer.count -= len(ts)
	b.xfer.mu.Unlock()
	return nil
}

// TransferRefused dead-letters t in its source's dead-letter subqueue,
// removing it from the outbox in the same write: its target refused it
// with cause for good (see [TransferRetryable]). A source deleted
// meanwhile has nowhere to keep it: the transfer is dropped, and logged.
func (b *Broker) TransferRefused(t *Transfer, cause error) error {
	src, err := b.lookup(ParseAddress(t.source))
	if err == nil && t.part >= 0 {
		if t.part < len(src.parts) {
			src = src.parts[t.part]
		} else {
			err = entityNotFound(t.source)
		}
	}
	if err != nil {
		if errors.Is(err, ErrClosed) {
			return err
		}
		b.log.Warn("dropped a transfer its target refused: its source is gone too",
			zap.String("source", t.source), zap.String("target", t.Target), zap.NamedError("refusal", cause))
		return b.Transferred([]*Transfer{t})
	}
	m := t.Message
	if m.ApplicationProperties == nil {
		m.ApplicationProperties = make(map[string]any, 2)
	}
	m.ApplicationProperties["DeadLetterReason"] = refusalReason(cause)
	m.ApplicationProperties["DeadLetterErrorDescription"] = cause.Error()
	p := &sendPlan{b: b, now: b.Now(), batch: storage.Batch{Sync: true}, owned: true, move: true}
	if err := p.addDeadLetter(src, m); err != nil {
		p.finish(true)
		return err
	}
	p.batch.Delete(outboxKey(t.group, t.num))
	if err := p.commit(); err != nil {
		return err
	}
	b.xfer.mu.Lock()
	b.xfer.count--
	b.xfer.mu.Unlock()
	return nil
}

// refusalReason is the DeadLetterReason of a transfer refused with err.
func refusalReason(err error) string {
	switch CodeOf(err) {
	case CodeNotFound:
		return ReasonForwardNotFound
	case CodeEntityDisabled:
		return ReasonForwardDisabled
	case CodeQuotaExceeded:
		return ReasonForwardQuota
	}
	return ReasonForwardRefused
}

// TransferRetryable reports whether a transfer that failed with err may
// succeed later (its target's group is changing leaders, cannot be
// reached, a write failed): the pump retries it. Any other failure is
// the target refusing it for good.
func TransferRetryable(err error) bool {
	switch CodeOf(err) {
	case CodeServerBusy, CodeOutcomeUnknown, CodeTimeout, CodeInternal:
		return true
	}
	return false
}

// addDeadLetter plans m as a new message of src's dead-letter subqueue
// (src a queue or a subscription), numbered by src's inlet (its topic's
// for a subscription).
func (p *sendPlan) addDeadLetter(src *entity, m *Message) error {
	ie := src
	if src.topic != nil {
		ie = src.topic
	}
	in := ie.in
	ps := &pendingSend{in: in}
	in.mu.Lock()
	seq := in.next
	in.next++
	ps.n++
	if in.next-1 > in.durable {
		for in.reserved < in.next-1 {
			in.reserved += seqBlock
		}
		ps.reserve = in.reserved
		p.batch.Set(idKey(tabSeq, ie.id), u64(uint64(in.reserved)))
	}
	in.pending = append(in.pending, ps)
	in.mu.Unlock()
	p.sends = append(p.sends, ps)

	now := p.now
	m.SequenceNumber, m.EnqueuedSequenceNumber = seq, seq
	m.EnqueuedTime = time.Unix(0, now).UTC()
	m.State = StateActive
	m.DeliveryCount = 0
	dead := src.q.dead
	r := p.newRec(m, seq, dead.id, now, MaxTimeToLive, int32(m.Size()))
	r.expiresAt = 0 // dead-lettered messages do not expire
	body, err := encodeBody(nil, m)
	if err != nil {
		return err
	}
	p.batch.Set(seqKey(tabBody, dead.id, seq), body)
	p.states.Set(seqKey(tabState, dead.id, seq), r.encode(nil))
	ps.places = append(ps.places, placement{q: dead, r: r})
	return p.reserve(ie, ie.desc.Load(), ps)
}

func outboxKey(g, n uint64) []byte {
	return binary.BigEndian.AppendUint64(idKey(tabOutbox, g), n)
}

// transferVersion starts an outbox record.
const transferVersion = 1

// encodeTransfer starts an outbox record: version, id, hops, source
// partition, target, source; the message's body record follows.
func encodeTransfer(id UUID, hops, part int, target, source string) []byte {
	b := make([]byte, 0, 64+len(target)+len(source))
	b = append(b, transferVersion)
	b = append(b, id[:]...)
	b = binary.AppendUvarint(b, uint64(hops))
	b = binary.AppendVarint(b, int64(part))
	b = binary.AppendUvarint(b, uint64(len(target)))
	b = append(b, target...)
	b = binary.AppendUvarint(b, uint64(len(source)))
	return append(b, source...)
}

// decodeTransfer reads an outbox record.
func decodeTransfer(v []byte) (*Transfer, error) {
	bad := errors.New("malformed transfer record")
	if len(v) < 17 || v[0] != transferVersion {
		return nil, bad
	}
	t := &Transfer{}
	copy(t.ID[:], v[1:17])
	v = v[17:]
	hops, n := binary.Uvarint(v)
	if n <= 0 {
		return nil, bad
	}
	v = v[n:]
	part, n := binary.Varint(v)
	if n <= 0 {
		return nil, bad
	}
	v = v[n:]
	var strs [2]string
	for i := range strs {
		l, n := binary.Uvarint(v)
		if n <= 0 || uint64(len(v)-n) < l {
			return nil, bad
		}
		strs[i] = string(v[n : n+int(l)])
		v = v[n+int(l):]
	}
	m, err := decodeBody(v)
	if err != nil {
		return nil, err
	}
	t.Hops, t.part, t.Target, t.source, t.Message = int(hops), int(part), strs[0], strs[1], m
	return t, nil
}

// recoverTransfers reads the outbox's extent and the applied ids kept.
func (b *Broker) recoverTransfers() error {
	x := &b.xfer
	x.applied = map[UUID]int64{}
	err := b.store.Scan([]byte{tabOutbox}, nil, func(k, _ []byte) (bool, error) {
		if len(k) == 17 {
			x.count++
			x.next = max(x.next, binary.BigEndian.Uint64(k[9:])+1)
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	err = b.store.Scan([]byte{tabApplied}, nil, func(k, v []byte) (bool, error) {
		if len(k) == 17 && len(v) == 8 {
			var id UUID
			copy(id[:], k[1:])
			at := int64(binary.BigEndian.Uint64(v))
			x.applied[id] = at
			x.order = append(x.order, appliedID{id: id, at: at})
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	sortApplied(x.order)
	return nil
}

package core

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
)

// Partitioned entities spread over groups.
//
// A routed broker over a [SpreadRouter] spreads the partitions of a
// partitioned queue or topic over the router's groups, so that one
// partitioned entity is served by several leaders. The router records,
// when the entity is created, which group holds each partition (a
// [Spread]); every group holding some of them holds the entity, told
// which partitions are its own ([Entity.HeldPartitions],
// partition_held.go), and a subscription of the topic in each of them
// (its partition p with the topic's partition p).
//
// The routed broker hands each operation on such an entity to a
// spreadBackend, which finds the group of each part of it:
//
//   - a send, by each message's partition key (partition.go), as one
//     broker picks its partition; the messages without one go together
//     to one group, and its broker picks one of its partitions;
//   - a settlement by its lock token's partition byte, a deferred receive
//     or a cancellation by its sequence numbers' top 16 bits;
//   - everything about a session by its session id's partition;
//   - a receive (and accepting the next session) from whichever group has
//     messages (route_spread_recv.go);
//   - a peek asks every group and merges their answers in sequence-number
//     order, counts add up, management goes to every group;
//   - a transaction binds to the group of its first operation, since it
//     uses one partition key (route_spread_txn.go).

// SpreadRouter is a [GroupRouter] that spreads partitioned queues and
// topics over several of its groups.
type SpreadRouter interface {
	GroupRouter
	// Spread returns where the partitions of the queue or topic named
	// name are, nil when they are not spread (name is placed in one
	// group, or nowhere).
	Spread(ctx context.Context, name string) (*Spread, error)
	// PlaceSpread spreads the n partitions of a new partitioned queue or
	// topic named name over the groups, recording that (and, as name's
	// group, its partition 0's) unless name has a place already. It
	// returns name's spread: nil when name is placed in one group (before,
	// or now because there is one group only).
	PlaceSpread(ctx context.Context, name string, n int, dupKeys bool) (*Spread, error)
	// GroupBackend returns the backend of group g.
	GroupBackend(g uint64) (Backend, error)
}

// Spread is where the partitions of a spread entity live.
type Spread struct {
	// Groups holds partition p's group at [p]; its length is the
	// entity's partition count.
	Groups []uint64
	// DupKeys is set when the entity detects duplicates: a message with
	// no SessionId or PartitionKey is then partitioned by its MessageId.
	DupKeys bool
}

// Distinct returns the groups of s, each once, in partition order.
func (s *Spread) Distinct() []uint64 {
	var out []uint64
	seen := map[uint64]bool{}
	for _, g := range s.Groups {
		if !seen[g] {
			seen[g] = true
			out = append(out, g)
		}
	}
	return out
}

// Held returns the HeldPartitions of group g's copy of the entity.
func (s *Spread) Held(g uint64) []bool {
	out := make([]bool, len(s.Groups))
	for p, x := range s.Groups {
		out[p] = x == g
	}
	return out
}

// spreadBackend is the [Backend] a routed broker hands a spread entity's
// operations to.
type spreadBackend struct {
	b  *Broker // the routed broker
	sr SpreadRouter
	sp *Spread
}

// routeSpread is route for a spread entity: its spreadBackend, nil when
// name is not spread.
func (b *Broker) routeSpread(name string) (Backend, error) {
	sr, ok := b.cfg.Router.(SpreadRouter)
	if !ok {
		return nil, nil
	}
	sp, err := sr.Spread(context.Background(), name)
	if err != nil || sp == nil {
		return nil, err
	}
	return &spreadBackend{b: b, sr: sr, sp: sp}, nil
}

// routeEntitySpread is routeEntity's part for spread entities: a new
// partitioned queue or topic is spread (its backend returned), and
// forwarding to a spread entity is refused: a forwarded message goes to
// one group (in the same write, or by transfer), which holds only some of
// the target's partitions. Forwarding from a spread entity is each of its
// groups' own (to a target in the same group, or by transfer). Nil, nil
// leaves e to the other rules.
func (b *Broker) routeEntitySpread(ctx context.Context, sr SpreadRouter, e Entity, create bool) (Backend, error) {
	home := e.Name
	if e.Kind == KindSubscription {
		home = e.Topic
	}
	for _, target := range []string{e.ForwardTo, e.ForwardDeadLetteredMessagesTo} {
		name := ParseAddress(target).Entity
		if name == "" || strings.EqualFold(name, home) {
			continue
		}
		sp, err := sr.Spread(ctx, name)
		if err != nil {
			return nil, err
		}
		if sp != nil {
			return nil, errf(CodeBadRequest, "%s '%s' forwards to '%s', whose partitions are spread over %d data groups: "+
				"forwarding to a partitioned entity is not supported in a cluster with data groups", e.Kind, e.Path(), name, len(sp.Distinct()))
		}
	}
	if !create || e.Kind == KindSubscription || !e.EnablePartitioning {
		return nil, nil
	}
	sp, err := sr.PlaceSpread(ctx, e.Name, b.cfg.PartitionCount, e.RequiresDuplicateDetection)
	if err != nil || sp == nil {
		return nil, err
	}
	return &spreadBackend{b: b, sr: sr, sp: sp}, nil
}

// be returns group g's backend.
func (s *spreadBackend) be(g uint64) (Backend, error) { return s.sr.GroupBackend(g) }

// groupOfPart returns the group of partition p (partition 0's for a
// number that names none: that group reports it unknown).
func (s *spreadBackend) groupOfPart(p int) uint64 {
	if p < 0 || p >= len(s.sp.Groups) {
		return s.sp.Groups[0]
	}
	return s.sp.Groups[p]
}

// groupOfKey returns the group of the partition key key.
func (s *spreadBackend) groupOfKey(key string) uint64 {
	return s.sp.Groups[partitionOfKey(key, len(s.sp.Groups))]
}

// groupOfLock returns the group of the partition that handed out tok.
func (s *spreadBackend) groupOfLock(tok LockToken) uint64 { return s.groupOfPart(int(tok[len(tok)-1])) }

// groupOfSeq returns the group of the partition numbering seq.
func (s *spreadBackend) groupOfSeq(seq int64) uint64 {
	if seq <= 0 {
		return s.sp.Groups[0]
	}
	return s.groupOfPart(PartitionOfSequence(seq))
}

// keyOf is m's partition key as a broker holding the entity sees it
// (partitionKey), "" for none.
func (s *spreadBackend) keyOf(m *Message) string {
	switch {
	case m.SessionID != "":
		return m.SessionID
	case m.PartitionKey != "":
		return m.PartitionKey
	case s.sp.DupKeys:
		return m.MessageIDString()
	}
	return ""
}

// anyGroup is the group a send's messages without a partition key go to.
func (s *spreadBackend) anyGroup() uint64 {
	gs := s.sp.Distinct()
	return gs[rand.IntN(len(gs))]
}

// splitBy groups n items by the group each belongs to (groupOf(i)),
// keeping their order within a group: gs lists the groups, at[j] the
// indexes of group gs[j]'s items.
func splitBy(n int, groupOf func(i int) uint64) (gs []uint64, at [][]int) {
	idx := map[uint64]int{}
	for i := range n {
		g := groupOf(i)
		j, ok := idx[g]
		if !ok {
			j = len(gs)
			idx[g] = j
			gs = append(gs, g)
			at = append(at, nil)
		}
		at[j] = append(at[j], i)
	}
	return gs, at
}

// splitMessages groups msgs by the group of each one's partition.
func (s *spreadBackend) splitMessages(msgs []*Message) (gs []uint64, at [][]int) {
	var anyG uint64
	return splitBy(len(msgs), func(i int) uint64 {
		if k := s.keyOf(msgs[i]); k != "" {
			return s.groupOfKey(k)
		}
		if anyG == 0 {
			anyG = s.anyGroup()
		}
		return anyG
	})
}

// pick returns the items of xs at the indexes at.
func pick[T any](xs []T, at []int) []T {
	out := make([]T, len(at))
	for j, i := range at {
		out[j] = xs[i]
	}
	return out
}

// Send implements Backend: each group gets the messages of its
// partitions, one group after the other.
func (s *spreadBackend) Send(ctx context.Context, path string, msgs ...*Message) ([]int64, error) {
	gs, at := s.splitMessages(msgs)
	seqs := make([]int64, len(msgs))
	for j, g := range gs {
		be, err := s.be(g)
		if err != nil {
			return nil, err
		}
		got, err := be.Send(ctx, path, pick(msgs, at[j])...)
		if err != nil {
			return nil, err
		}
		for k, i := range at[j] {
			if k < len(got) {
				seqs[i] = got[k]
			}
		}
	}
	return seqs, nil
}

// SendAsync implements Backend: each group's part is sent as its own
// asynchronous send, in the caller's order (so order per partition key
// holds); done runs once all have ended.
func (s *spreadBackend) SendAsync(path string, msgs []*Message, done func(seqs []int64, err error)) error {
	gs, at := s.splitMessages(msgs)
	if len(gs) == 1 {
		be, err := s.be(gs[0])
		if err != nil {
			return err
		}
		return be.SendAsync(path, msgs, done)
	}
	j := joinSends(len(msgs), len(gs), done)
	for k, g := range gs {
		be, err := s.be(g)
		if err == nil {
			err = be.SendAsync(path, pick(msgs, at[k]), j.part(at[k]))
		}
		if err != nil {
			if k == 0 {
				return err // nothing started
			}
			go j.part(at[k])(nil, err)
		}
	}
	return nil
}

// Settle implements Backend: on the group of tok's partition.
func (s *spreadBackend) Settle(ctx context.Context, path string, tok LockToken, o Outcome) error {
	be, err := s.be(s.groupOfLock(tok))
	if err != nil {
		return err
	}
	return be.Settle(ctx, path, tok, o)
}

// CompleteMany implements Backend: each group completes its tokens, the
// groups at the same time (most of them are led by other nodes, each a
// round trip with a commit in it: one after the other, a completion
// waited for the sum of them).
func (s *spreadBackend) CompleteMany(path string, toks []LockToken, durable bool) []error {
	errs := make([]error, len(toks))
	gs, at := splitBy(len(toks), func(i int) uint64 { return s.groupOfLock(toks[i]) })
	completeIn := func(j int) {
		be, err := s.be(gs[j])
		var got []error
		if err == nil {
			got = be.CompleteMany(path, pick(toks, at[j]), durable)
		}
		for k, i := range at[j] {
			switch {
			case err != nil:
				errs[i] = err
			case k < len(got):
				errs[i] = got[k]
			}
		}
	}
	var wg sync.WaitGroup
	for j := 1; j < len(gs); j++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			completeIn(j)
		}()
	}
	if len(gs) > 0 {
		completeIn(0)
	}
	wg.Wait()
	return errs
}

// RenewLock implements Backend: on the group of tok's partition.
func (s *spreadBackend) RenewLock(ctx context.Context, path string, tok LockToken) (time.Time, error) {
	be, err := s.be(s.groupOfLock(tok))
	if err != nil {
		return time.Time{}, err
	}
	return be.RenewLock(ctx, path, tok)
}

// CancelScheduled implements Backend: each group cancels the numbers of
// its partitions.
func (s *spreadBackend) CancelScheduled(ctx context.Context, path string, seqs []int64) error {
	gs, at := splitBy(len(seqs), func(i int) uint64 { return s.groupOfSeq(seqs[i]) })
	for j, g := range gs {
		be, err := s.be(g)
		if err == nil {
			err = be.CancelScheduled(ctx, path, pick(seqs, at[j]))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// DeleteMessages implements Backend: the groups in turn, until max are
// deleted (a session's, in its group).
func (s *spreadBackend) DeleteMessages(ctx context.Context, path string, opts DeleteOptions) (int, error) {
	gs := s.sp.Distinct()
	if opts.SessionID != "" {
		gs = []uint64{s.groupOfKey(opts.SessionID)}
	}
	total := 0
	for _, g := range gs {
		be, err := s.be(g)
		if err != nil {
			return total, err
		}
		o := opts
		o.Max = opts.Max - total
		n, err := be.DeleteMessages(ctx, path, o)
		total += n
		if err != nil {
			return total, err
		}
		if total >= opts.Max {
			break
		}
	}
	return total, nil
}

// BeginTxn implements Backend (route_spread_txn.go).
func (s *spreadBackend) BeginTxn() *Txn { return NewRemoteTxn(s.b, &spreadTxn{s: s}) }

// EachEntity implements Backend; a routed broker never asks a stand-in.
func (s *spreadBackend) EachEntity(func(*EntitySnapshot)) {}

var _ Backend = (*spreadBackend)(nil)

package raftstore

import (
	"context"
	"fmt"
	"hash/maphash"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/omnibusmq/omnibus/storage"
)

// Holding a follower's applies.
//
// A follower's state database is read by no client: its broker serves
// nothing of the group until the node leads it, and what else reads a
// replica (ReadReplica, the placement loop) accepts one that lags. So a
// follower may apply committed entries a little late, and it gains by
// it: the writes and deletions of a message that lives shorter than the
// hold meet in one batch, where coalesceOps drops them (coalesce.go), so
// the message's body is never copied into the state database's memtable,
// flushed or compacted. Entries are durable in the Raft log before they
// are committed, so holding them risks nothing: a node that stops with
// applies held replays them from the log, as after any stop (the state
// database has no write-ahead log of its own).
//
// The applier holds what it is given while the node follows a group that
// holds the broker's messages (holdsBrokerData), for at most
// Config.FollowerApplyDelay (DefaultFollowerApplyDelay) after the first
// held item and maxHeldApplyBytes of entries. It applies at once, with
// what it holds: when the node leads (a new leader serves only once it
// has applied its predecessor's entries; the empty entry raft appends at
// each election reaches the applier after softState published the new
// leader, and takes the held ones with it), a snapshot
// to install, a conf change (raft's campaign checks for unapplied ones
// and membership follows them), and while WaitApplied waits for an index
// this node has not applied.

// DefaultFollowerApplyDelay is how long a follower may hold committed
// entries before applying them (Config.FollowerApplyDelay). What it
// gains depends on how long the broker's messages live: one that
// outlives the hold, or straddles two, reaches the state database
// anyway. Under load a message lives from its send to its completion
// about as long as a receiver's credit takes to drain (half a second and
// more with every node held to 0.2 cores); with 500 ms two thirds of a
// follower's operations still reached Pebble, with 2 s one fifth
// (storage/raftstore/README.md, "A longer hold").
const DefaultFollowerApplyDelay = 2 * time.Second

// maxHeldApplyBytes bounds the entries a follower holds.
const maxHeldApplyBytes = 16 << 20

// heldApplies is the applier's held items, oldest first.
type heldApplies struct {
	items []applyWork
	bytes int
	dueAt int64       // mono when the oldest has waited the delay
	timer *time.Timer // fires then
	seed  maphash.Seed
}

// due is a channel that receives when the held items must be applied;
// nil (never) while none are held.
func (h *heldApplies) due() <-chan time.Time {
	if len(h.items) == 0 || h.timer == nil {
		return nil
	}
	return h.timer.C
}

// takeWith returns the held items followed by items, and whether any
// were held (the run is then coalesced), holding none after.
func (h *heldApplies) takeWith(items []applyWork) ([]applyWork, bool) {
	if len(h.items) == 0 {
		return items, false
	}
	all := append(h.items, items...)
	h.items, h.bytes = nil, 0
	h.timer.Stop()
	return all, true
}

func (h *heldApplies) stop() {
	if h.timer != nil {
		h.timer.Stop()
	}
}

// hold adds items to the held applies and reports true, or reports false
// (adding nothing) when they and what is held must be applied now.
func (n *Node) hold(items []applyWork) bool {
	h := &n.apl.held
	delay := n.cfg.FollowerApplyDelay
	if delay <= 0 || n.leader.Load() == n.id || n.applyUpTo.Load() > n.applied.Load() || !n.holdsBrokerData() {
		return false
	}
	if len(h.items) > 0 && n.mono() >= h.dueAt {
		return false
	}
	size, through := h.bytes, n.heldThrough.Load()
	for _, it := range items {
		if it.install != nil {
			return false
		}
		for i := range it.m.Entries {
			if it.m.Entries[i].Type != pb.EntryNormal {
				return false
			}
			size += len(it.m.Entries[i].Data)
			through = it.m.Entries[i].Index
		}
	}
	if size > maxHeldApplyBytes {
		return false
	}
	if len(h.items) == 0 {
		h.dueAt = n.mono() + int64(delay)
		if h.timer == nil {
			h.seed = maphash.MakeSeed()
			h.timer = time.NewTimer(delay)
		} else {
			h.timer.Reset(delay)
		}
	}
	h.items = append(h.items, items...)
	h.bytes = size
	n.heldThrough.Store(through)
	return true
}

// holdsBrokerData reports whether the group holds the broker's
// messages: a data group, or the meta group of a cluster without them.
// The meta group of a cluster with data groups holds only placement,
// namespaces and the peer book, which its followers read (ReadReplica)
// and which gain nothing from a hold.
func (n *Node) holdsBrokerData() bool { return n.group != 0 || n.DataGroups() == 0 }

// WaitApplied waits until this node has applied index (or ctx ends, or
// the node stops), asking its applier to apply what it holds meanwhile.
func (n *Node) WaitApplied(ctx context.Context, index uint64) error {
	for {
		if n.applied.Load() >= index {
			return nil
		}
		if up := n.applyUpTo.Load(); up < index && n.applyUpTo.CompareAndSwap(up, index) {
			n.applyQ.push(applyWork{}) // wake it: what it holds goes now
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("raftstore: node %d has applied %d of the %d asked: %w", n.id, n.applied.Load(), index, ctx.Err())
		case <-n.stopc:
			return storage.ErrClosed
		case <-time.After(2 * time.Millisecond):
		}
	}
}

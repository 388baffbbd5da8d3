package raftstore

import (
	"context"
	"fmt"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/omnibusmq/omnibus/storage"
)

// Holding a follower's applies.
//
// A follower's state database is read by no client: its broker serves
// nothing of the group until the node leads it, and what else reads a
// replica (ReadReplica, the placement loop) reads the meta group, whose
// followers do not hold. So a follower may apply committed entries a
// little late, and it gains by it: the writes and deletions of a message
// that lives shorter than the hold are both held at once, where heldOps
// drops them (coalesce.go), so the message's body is never copied into
// the state database's memtable, flushed or compacted. Entries are
// durable in the Raft log before they are committed, so holding them
// risks nothing: a node that stops with applies held replays them from
// the log, as after any stop (the state database has no write-ahead log
// of its own).
//
// The applier holds what it is given while the node follows a group that
// holds the broker's messages (holdsBrokerData), decoding and coalescing
// each entry as it comes. Once the oldest held item has waited
// Config.FollowerApplyDelay (DefaultFollowerApplyDelay), every item held
// at least three quarters of it is applied, oldest first, and the
// younger stay: each operation is applied between three quarters of the
// delay and the whole of it after it came, and a message that lives less
// than three quarters of the delay never reaches the state database,
// however its send and completion fall in time (a hold applied whole at
// the end of each delay lets through every message that straddles its
// end: one living half the delay, half the time). The oldest held go too
// while the entries held exceed maxHeldApplyBytes. The applier applies
// at once all it holds, and what it is given: when the node leads (a new
// leader serves only once it has applied its predecessor's entries; the
// empty entry raft appends at each election reaches the applier after
// softState published the new leader, and takes the held ones with it),
// a snapshot to install, a conf change (raft's campaign checks for
// unapplied ones and membership follows them), and while WaitApplied
// waits for an index this node has not applied.

// DefaultFollowerApplyDelay is how long a follower may hold committed
// entries before applying them (Config.FollowerApplyDelay). What it
// gains depends on how long the broker's messages live: one that
// outlives three quarters of it may reach the state database. Under load
// a message lives from its send to its completion about as long as the
// queue's backlog takes to drain (a third of a second to two seconds in
// the cluster benchmarks, every node held to 0.2 cores; storage/raftstore/
// RESULTS.md, "A longer hold" and "A hold that slides").
const DefaultFollowerApplyDelay = 2 * time.Second

// maxHeldApplyBytes bounds the entries a follower holds.
const maxHeldApplyBytes = 16 << 20

// heldApplies is the applier's held items, oldest first, and their
// operations.
type heldApplies struct {
	items []heldItem
	bytes int // of the held entries' data
	ops   heldOps
	timer *time.Timer // fires when the oldest item is due
}

// heldItem is one MsgStorageApply held: kept for its responses (released
// once it is applied) and its entries (which the held operations point
// into).
type heldItem struct {
	m     pb.Message
	at    int64 // mono when it was held
	end   int   // the position after its operations in heldOps
	bytes int
	ours  []entryHeader // entries this node proposed, answered once applied
}

// due is a channel that receives when the oldest held item is due; nil
// (never) while none are held.
func (h *heldApplies) due() <-chan time.Time {
	if len(h.items) == 0 || h.timer == nil {
		return nil
	}
	return h.timer.C
}

// arm sets the timer for the oldest held item, or stops it.
func (h *heldApplies) arm(now int64, delay time.Duration) {
	if len(h.items) == 0 {
		h.stop()
		return
	}
	wait := time.Duration(max(0, h.items[0].at+int64(delay)-now))
	if h.timer == nil {
		h.timer = time.NewTimer(wait)
	} else {
		h.timer.Reset(wait)
	}
}

func (h *heldApplies) stop() {
	if h.timer != nil {
		h.timer.Stop()
	}
}

// ripe is how many of the oldest held items to apply at now: none until
// the oldest has waited delay, then every one held at least three
// quarters of it; and more, oldest first, until what stays is within
// maxHeldApplyBytes.
func (h *heldApplies) ripe(now int64, delay time.Duration) int {
	k := 0
	if len(h.items) > 0 && now-h.items[0].at >= int64(delay) {
		for k < len(h.items) && now-h.items[k].at >= int64(delay)*3/4 {
			k++
		}
	}
	staying := h.bytes
	for i := range k {
		staying -= h.items[i].bytes
	}
	for ; k < len(h.items) && staying > maxHeldApplyBytes; k++ {
		staying -= h.items[k].bytes
	}
	return k
}

// mayHold reports whether the applier may hold items (and what it holds
// already): the node follows a group of the broker's messages, nothing
// waits for it to apply, and items are plain entries.
func (n *Node) mayHold(items []applyWork) bool {
	if n.cfg.FollowerApplyDelay <= 0 || n.leader.Load() == n.id || n.applyUpTo.Load() > n.applied.Load() || !n.holdsBrokerData() {
		return false
	}
	for _, it := range items {
		if it.install != nil {
			return false
		}
		for i := range it.m.Entries {
			if it.m.Entries[i].Type != pb.EntryNormal {
				return false
			}
		}
	}
	return true
}

// holdItems adds items to the held applies, decoding their entries'
// operations and coalescing them with those held.
func (n *Node) holdItems(items []applyWork) {
	a := &n.apl
	h := &a.held
	if h.ops.lastSet.slots == nil {
		h.ops = newHeldOps()
	}
	now := n.mono()
	for _, it := range items {
		hi := heldItem{m: it.m, at: now}
		dropped := 0
		for i := range it.m.Entries {
			e := &it.m.Entries[i]
			hi.bytes += len(e.Data)
			var hd entryHeader
			var ours bool
			a.scratch, hd, ours = n.entryOps(e, a.scratch[:0])
			for _, op := range a.scratch {
				dropped += h.ops.add(op)
			}
			if ours {
				hi.ours = append(hi.ours, hd)
			}
		}
		if es := it.m.Entries; len(es) > 0 {
			n.heldThrough.Store(es[len(es)-1].Index)
		}
		clear(a.scratch)
		hi.end = h.ops.end()
		h.items = append(h.items, hi)
		h.bytes += hi.bytes
		n.heldDropped.Add(uint64(dropped))
	}
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
		moved := n.AppliedMoved()
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
		case <-moved:
		}
	}
}

package raftstore

import (
	"encoding/json"
	"fmt"
	"os"

	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/storage"
)

// applyWork is one item for the applier: a MsgStorageApply, or a
// snapshot to install (an item with neither only wakes the applier).
type applyWork struct {
	m       pb.Message
	install *installWork
}

// installWork asks the applier to swap in a received checkpoint.
type installWork struct {
	snap pb.Snapshot
	done chan error
}

// applierState is what only the applier touches (and Open, before it
// starts).
type applierState struct {
	// applied/appliedTerm: the last entry handed to the state machine
	// (published through Node.appliedPos); stateApplied/stateTerm: what
	// the state database holds, which may be ahead after a snapshot
	// whose checkpoint was taken later than its metadata: entries up to
	// it are skipped.
	applied, appliedTerm    uint64
	stateApplied, stateTerm uint64
	ops                     []storage.Op // reused
	scratch                 []storage.Op // reused by holdItems
	held                    heldApplies  // a follower's applies not yet made (hold.go)
	// flushCancel, closed when a snapshot replaces the state database,
	// releases a compaction waiting for that database's flush.
	flushCancel chan struct{}
}

// runApplier applies committed entries. Consecutive MsgStorageApply
// messages become one batch on the state database; a follower holds them
// for a while first (hold.go).
func (n *Node) runApplier() {
	defer close(n.applyDone)
	defer n.recoverInto("state machine")
	h := &n.apl.held
	defer h.stop()
	for {
		select {
		case <-n.stopc:
			return
		case <-n.applyQ.ready():
		case <-h.due():
		}
		items := n.applyQ.takeAll()
		if n.mayHold(items) {
			n.holdItems(items)
			now := n.mono()
			if k := h.ripe(now, n.cfg.FollowerApplyDelay); k > 0 {
				if !n.applyHeld(k) {
					return
				}
				n.maybeCompact()
			}
			h.arm(now, n.cfg.FollowerApplyDelay)
			continue
		}
		if len(h.items) > 0 && !n.applyHeld(len(h.items)) {
			return
		}
		h.stop()
		for i := 0; i < len(items); {
			if w := items[i].install; w != nil {
				w.done <- n.installSnapshot(w.snap)
				i++
				continue
			}
			j := i + 1
			for j < len(items) && items[j].install == nil {
				j++
			}
			if !n.applyRun(items[i:j]) {
				return
			}
			i = j
		}
		n.maybeCompact()
	}
}

// entryOps appends to ops what normal entry e writes to the state
// database (nothing for an entry the database already holds, a new
// leader's empty entry, or one that does not decode), and returns its
// header and whether this node proposed it (its Apply call waits here).
func (n *Node) entryOps(e *pb.Entry, ops []storage.Op) ([]storage.Op, entryHeader, bool) {
	if len(e.Data) == 0 {
		return ops, entryHeader{}, false // a new leader's empty entry
	}
	if e.Data[0] == placementEntry {
		p, err := decodePlacement(e.Data)
		if err != nil {
			n.log.Error("skipping a placement record that does not decode", zap.Uint64("index", e.Index), zap.Error(err))
		} else if e.Index > n.apl.stateApplied {
			b, _ := json.Marshal(p)
			ops = append(ops, storage.Op{Kind: storage.OpSet, Key: placeKey(p.Group), Value: b})
		}
		return ops, entryHeader{}, false
	}
	before := len(ops)
	h, ops, err := decodeEntry(e.Data, ops)
	if err != nil {
		// Every node decodes the same bytes: skipping is the one answer
		// that keeps the replicas equal.
		n.log.Error("skipping a log entry that does not decode", zap.Uint64("index", e.Index), zap.Error(err))
		return ops[:before], entryHeader{}, false
	}
	if e.Index <= n.apl.stateApplied {
		ops = ops[:before]
	}
	return ops, h, h.node == n.id && h.nonce == n.nonce
}

// applyRun applies the entries of a run of MsgStorageApply as one batch
// with the applied index, then wakes the Apply calls they answer and
// releases raft's responses. Entries the database already holds are
// skipped; conf changes go to the loop (raft's RawNode is the loop's) in
// order with the responses.
func (n *Node) applyRun(items []applyWork) bool {
	a := &n.apl
	batch := storage.Batch{Ops: a.ops[:0]}
	var ours []entryHeader
	var last *pb.Entry
	for _, it := range items {
		for i := range it.m.Entries {
			e := &it.m.Entries[i]
			last = e
			switch e.Type {
			case pb.EntryNormal:
				var h entryHeader
				var mine bool
				batch.Ops, h, mine = n.entryOps(e, batch.Ops)
				if mine {
					ours = append(ours, h)
				}
			case pb.EntryConfChange, pb.EntryConfChangeV2:
				cc, err := decodeConfChange(e)
				if err != nil {
					n.log.Error("skipping a conf change that does not decode", zap.Uint64("index", e.Index), zap.Error(err))
					continue
				}
				if e.Index > a.stateApplied {
					recordPeers(&batch, cc)
				}
				n.inbox.push(func() { n.applyConfChange(cc) })
				n.compactNow.Store(true)
			}
		}
	}
	if !n.commitApplied(&batch, last) {
		return false
	}
	if len(ours) > 0 {
		n.answer(ours)
	}
	for _, it := range items {
		n.release(it.m.Responses)
	}
	return true
}

// applyHeld applies the k oldest held items: their operations that
// coalescing kept, as one batch with the applied index.
func (n *Node) applyHeld(k int) bool {
	a := &n.apl
	h := &a.held
	taken := h.items[:k]
	batch := storage.Batch{Ops: h.ops.take(taken[k-1].end, a.ops[:0])}
	var last *pb.Entry
	for i := range taken {
		if es := taken[i].m.Entries; len(es) > 0 {
			last = &es[len(es)-1]
		}
	}
	if !n.commitApplied(&batch, last) {
		return false
	}
	for i := range taken {
		if len(taken[i].ours) > 0 {
			n.answer(taken[i].ours)
		}
		n.release(taken[i].m.Responses)
		h.bytes -= taken[i].bytes
	}
	rest := copy(h.items, h.items[k:])
	clear(h.items[rest:])
	h.items = h.items[:rest]
	if rest == 0 {
		n.heldThrough.Store(0)
	}
	return true
}

// commitApplied writes batch with the applied index of last (the last
// entry of what it applies; nil: none) and publishes that index. The
// batch's operations are cleared after (they point into the entries).
func (n *Node) commitApplied(batch *storage.Batch, last *pb.Entry) bool {
	a := &n.apl
	if last != nil && last.Index > a.stateApplied {
		batch.Set(metaApplied, appliedRecord(last.Index, last.Term))
		if !n.retry("apply", func() error { return n.state.apply(batch) }) {
			return false
		}
		a.stateApplied, a.stateTerm = last.Index, last.Term
	}
	clear(batch.Ops) // drop references into the entries
	a.ops = batch.Ops[:0]
	if last != nil {
		a.applied, a.appliedTerm = last.Index, last.Term
		n.setApplied(last.Index, last.Term)
	}
	return true
}

func decodeConfChange(e *pb.Entry) (pb.ConfChangeI, error) {
	if e.Type == pb.EntryConfChange {
		var cc pb.ConfChange
		err := cc.Unmarshal(e.Data)
		return cc, err
	}
	var cc pb.ConfChangeV2
	err := cc.Unmarshal(e.Data)
	return cc, err
}

// applyConfChange (on the loop) applies a membership change to raft and
// to the transport's peers.
func (n *Node) applyConfChange(cc pb.ConfChangeI) {
	l := &n.loop
	l.confState = *l.rn.ApplyConfChange(cc)
	n.publishVoters(l.confState)
	addr := peerAddrOf(cc)
	for _, c := range cc.AsV2().Changes {
		switch c.Type {
		case pb.ConfChangeAddNode, pb.ConfChangeAddLearnerNode:
			if addr != "" && c.NodeID != n.id {
				l.peers[c.NodeID] = addr
				n.tr.setPeer(c.NodeID, addr)
			}
		case pb.ConfChangeRemoveNode:
			delete(l.peers, c.NodeID)
			if c.NodeID != n.id {
				n.tr.removePeer(c.NodeID)
			}
		}
	}
	n.log.Info("membership changed", zap.Uint64s("voters", l.confState.Voters), zap.Uint64s("learners", l.confState.Learners))
}

// peerAddrOf reads the peer address a conf change carries in its context.
func peerAddrOf(cc pb.ConfChangeI) string {
	switch c := cc.(type) {
	case pb.ConfChange:
		return string(c.Context)
	case pb.ConfChangeV2:
		return string(c.Context)
	}
	return ""
}

// installSnapshot (on the applier) replaces the state database with the
// checkpoint that came with snap.
func (n *Node) installSnapshot(snap pb.Snapshot) error {
	a := &n.apl
	idx := snap.Metadata.Index
	n.snapMu.Lock()
	dir, ok := n.snapDirs[idx]
	delete(n.snapDirs, idx)
	for i, d := range n.snapDirs {
		if i < idx {
			removeAll(d)
			delete(n.snapDirs, i)
		}
	}
	n.snapMu.Unlock()
	if !ok {
		return fmt.Errorf("raft accepted snapshot %d, whose checkpoint never arrived", idx)
	}
	var applied, term uint64
	if !n.retry("install snapshot", func() error {
		var err error
		applied, term, err = n.state.install(dir)
		return err
	}) {
		return storage.ErrClosed
	}
	if applied < idx {
		return fmt.Errorf("%w: snapshot %d came with a checkpoint at %d", storage.ErrCorrupt, idx, applied)
	}
	a.stateApplied, a.stateTerm = applied, term
	a.applied, a.appliedTerm = idx, snap.Metadata.Term
	if a.flushCancel != nil {
		close(a.flushCancel)
		a.flushCancel = nil
	}
	n.setApplied(idx, snap.Metadata.Term)
	n.snapshotsInstalled.Add(1)
	cs := snap.Metadata.ConfState
	book, err := n.state.peerBook()
	if err != nil {
		n.log.Warn("cannot read the peer book of an installed snapshot", zap.Error(err))
	}
	n.inbox.push(func() {
		n.loop.confState = cs
		n.publishVoters(cs)
		for _, id := range n.learnPeers(book, cs) {
			n.tr.setPeer(id, n.loop.peers[id])
		}
	})
	n.log.Info("installed a snapshot", zap.Uint64("index", idx), zap.Uint64("stateApplied", applied))
	return nil
}

// maybeCompact (on the applier) asks for a log compaction once the log
// has grown past SnapshotEntries or SnapshotBytes since the last
// snapshot, or a membership change was applied: raft sends a new member
// the latest snapshot, whose ConfState must include it (etcd raft
// ignores a snapshot that does not name the node it is sent to). The
// state database, which has no write-ahead log of its own, is flushed
// first: the log it drops must be in it, durably. The loop notes the
// ConfState as of the applied index (it has run every conf change the
// applier sent before this request, and none after) and, on a leader, its
// slowest follower's match; once the flush is done the work goes to the
// appender. The applier goes on meanwhile.
func (n *Node) maybeCompact() {
	a := &n.apl
	snap := n.snapshotIndex.Load()
	if a.applied <= snap || n.compactPending.Load() ||
		(!n.compactNow.Load() && a.applied-snap < n.cfg.SnapshotEntries && n.logBytes.Load() < n.cfg.SnapshotBytes) {
		return
	}
	n.compactNow.Store(false)
	var flushed <-chan struct{}
	if !n.retry("flush before compaction", func() (err error) {
		flushed, err = n.state.flushAsync()
		return err
	}) {
		return
	}
	n.compactPending.Store(true)
	index := a.applied
	cancel := make(chan struct{})
	a.flushCancel = cancel
	n.inbox.push(func() {
		cs, slowest := n.loop.confState, n.loop.slowestMatch()
		go func() {
			select {
			case <-flushed:
			case <-cancel: // a snapshot replaced the database: compactLog finds nothing to do
			case <-n.stopc:
				return
			}
			n.appendQ.push(appendWork{compact: &compactWork{index: index, cs: cs, slowest: slowest}})
		}()
	})
}

// setApplied publishes the applied position.
func (n *Node) setApplied(index, term uint64) {
	n.appliedMu.Lock()
	n.appliedIdx, n.appliedTerm = index, term
	n.appliedMu.Unlock()
	n.applied.Store(index)
	n.publishApplied()
	n.inbox.push(func() {}) // the loop re-evaluates whether it may serve
}

// appliedPos is the applied index and its term.
func (n *Node) appliedPos() (index, term uint64) {
	n.appliedMu.Lock()
	defer n.appliedMu.Unlock()
	return n.appliedIdx, n.appliedTerm
}

func removeAll(dir string) { _ = os.RemoveAll(dir) }

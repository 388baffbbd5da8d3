package raftstore

import (
	"math"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"go.uber.org/zap"
)

// appendWork is one item for the appender: a MsgStorageAppend, or a log
// compaction the applier asked for.
type appendWork struct {
	m       pb.Message
	compact *compactWork
}

// compactWork: snapshot the log at index (cs is the ConfState as of it)
// and drop what lies behind the catch-up margin. slowest is, on a
// leader, the lowest match of a follower it replicates to (0: none known,
// or not the leader).
type compactWork struct {
	index   uint64
	cs      pb.ConfState
	slowest uint64
}

// runAppender writes the log. Every MsgStorageAppend queued while the
// previous write was being fsynced goes into the next batch: one fsync
// for all of them (group commit). Only then are the responses raft
// attached released: a follower's acknowledgement to its leader, the
// leader's own.
func (n *Node) runAppender() {
	defer close(n.appendDone)
	defer n.recoverInto("raft log")
	hs, _, _ := n.logs.mem.InitialState()
	prev := hs
	for {
		select {
		case <-n.stopc:
			return
		case <-n.appendQ.ready():
		}
		items := n.appendQ.takeAll()
		for i := 0; i < len(items); {
			switch {
			case items[i].compact != nil:
				n.compactLog(*items[i].compact)
				i++
			case items[i].m.Snapshot != nil && !raft.IsEmptySnap(*items[i].m.Snapshot):
				if !n.appendSnapshot(items[i].m, &prev) {
					return
				}
				i++
			default:
				j := i + 1
				for j < len(items) && items[j].compact == nil &&
					(items[j].m.Snapshot == nil || raft.IsEmptySnap(*items[j].m.Snapshot)) {
					j++
				}
				if !n.appendRun(items[i:j], &prev) {
					return
				}
				i = j
			}
		}
	}
}

// appendRun writes a run of appends as one batch.
func (n *Node) appendRun(items []appendWork, prev *pb.HardState) bool {
	var ents []pb.Entry
	var hs pb.HardState
	for _, it := range items {
		m := it.m
		if len(m.Entries) > 0 {
			first := m.Entries[0].Index
			// A later append may overwrite the tail of an earlier one.
			for len(ents) > 0 && ents[len(ents)-1].Index >= first {
				ents = ents[:len(ents)-1]
			}
			ents = append(ents, m.Entries...)
		}
		if st := (pb.HardState{Term: m.Term, Vote: m.Vote, Commit: m.Commit}); !raft.IsEmptyHardState(st) {
			hs = st
		}
	}
	mustSync := len(ents) > 0 || (!raft.IsEmptyHardState(hs) && (hs.Term != prev.Term || hs.Vote != prev.Vote))
	if !n.retry("log write", func() error { return n.logs.save(hs, ents, pb.Snapshot{}, mustSync) }) {
		return false
	}
	if !raft.IsEmptyHardState(hs) {
		*prev = hs
	}
	var bytes uint64
	for i := range ents {
		bytes += uint64(len(ents[i].Data))
	}
	n.logBytes.Add(bytes)
	for _, it := range items {
		n.release(it.m.Responses)
	}
	return true
}

// appendSnapshot installs a snapshot raft accepted (the applier swaps the
// state database, after applying everything queued before it), then
// records it in the log.
func (n *Node) appendSnapshot(m pb.Message, prev *pb.HardState) bool {
	done := make(chan error, 1)
	n.applyQ.push(applyWork{install: &installWork{snap: *m.Snapshot, done: done}})
	select {
	case err := <-done:
		if err != nil {
			panic("raftstore: installing a snapshot: " + err.Error())
		}
	case <-n.stopc:
		return false
	}
	hs := pb.HardState{Term: m.Term, Vote: m.Vote, Commit: m.Commit}
	if !n.retry("log write", func() error { return n.logs.save(hs, m.Entries, *m.Snapshot, true) }) {
		return false
	}
	if !raft.IsEmptyHardState(hs) {
		*prev = hs
	}
	n.snapshotIndex.Store(m.Snapshot.Metadata.Index)
	n.logBytes.Store(0)
	n.release(m.Responses)
	return true
}

// release delivers responses raft attached to a local write: to this
// node through the loop's inbox, to peers through the transport.
func (n *Node) release(resps []pb.Message) {
	var out []pb.Message
	for _, r := range resps {
		if r.To == n.id {
			n.inbox.push(func() { n.stepLocal(r) })
			continue
		}
		out = append(out, r)
	}
	if len(out) == 0 || n.stalled.Load() {
		return
	}
	for _, r := range out {
		n.tr.send(r.To, []pb.Message{r})
	}
}

// compactLog records a snapshot at c.index and drops the log behind a
// catch-up margin: at most catchUpEntries entries and catchUpBytes bytes
// for followers a little behind, and on a leader everything from its
// slowest follower's match on, up to Config.lagging bytes. A follower cut
// off for a second or two under load falls thousands of entries behind;
// without the second margin it would need a snapshot of the whole state
// database (a group with a backlog of 100,000 messages: 120 MB) where a
// few MiB of log do. A follower further behind than Config.lagging
// needs a snapshot whatever is kept, so then only the first margin is.
func (n *Node) compactLog(c compactWork) {
	defer func() {
		n.compactPending.Store(false)
		if n.compactNow.Load() { // a membership change came meanwhile
			n.applyQ.push(applyWork{})
		}
	}()
	mem := n.logs.mem
	last, _ := mem.LastIndex()
	snap, _ := mem.Snapshot()
	index := min(c.index, last)
	if index <= snap.Metadata.Index {
		return
	}
	first, _ := mem.FirstIndex()
	keepFrom := keptFrom(mem, max(first, index+1-min(index, n.cfg.catchUp)), index, catchUpBytes)
	if need := c.slowest + 1; c.slowest > 0 && need < keepFrom && n.cfg.lagging > 0 {
		if from := keptFrom(mem, max(first, need), index, max(catchUpBytes, uint64(n.cfg.lagging))); from <= need {
			keepFrom = from
		}
	}
	if !n.retry("log compaction", func() error { return n.logs.compact(index, c.cs, keepFrom) }) {
		return
	}
	var kept uint64
	if ents, err := mem.Entries(keepFrom, last+1, math.MaxUint64); err == nil && keepFrom <= last {
		for i := range ents {
			kept += uint64(len(ents[i].Data))
		}
	}
	n.snapshotIndex.Store(index)
	n.logBytes.Store(kept)
	n.log.Debug("log compacted", zap.Uint64("snapshot", index), zap.Uint64("keepFrom", keepFrom))
}

// keptFrom is the first index of the log to keep so that the entries
// from lo to index, the newest first, stay within budget bytes; index+1
// when not even the newest fits.
func keptFrom(mem *raft.MemoryStorage, lo, index, budget uint64) uint64 {
	keepFrom := index + 1
	ents, err := mem.Entries(lo, index+1, math.MaxUint64)
	if err != nil {
		return keepFrom
	}
	var bytes uint64
	for i := len(ents) - 1; i >= 0; i-- {
		bytes += uint64(ents[i].Size())
		if bytes > budget {
			break
		}
		keepFrom = ents[i].Index
	}
	return keepFrom
}

// slowestMatch (on the loop) is, on a leader, the lowest match among the
// followers it replicates to from its log, for compactLog's second
// margin; 0 when not the leader or none. A follower with nothing matched
// yet (a new member) or already being sent a snapshot is left out: the
// log would not spare it that snapshot.
func (l *loopState) slowestMatch() uint64 {
	st := l.rn.BasicStatus()
	if st.RaftState != raft.StateLeader {
		return 0
	}
	self := st.ID
	var slowest uint64
	l.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id == self || pr.Match == 0 || pr.State == tracker.StateSnapshot {
			return
		}
		if slowest == 0 || pr.Match < slowest {
			slowest = pr.Match
		}
	})
	return slowest
}

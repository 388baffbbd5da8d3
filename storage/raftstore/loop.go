package raftstore

import (
	"fmt"
	"math"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/storage"
)

// The node runs three goroutines around etcd raft's RawNode, which is
// configured with AsyncStorageWrites:
//
//   - the loop owns the RawNode: it ticks, steps peers' frames and local
//     responses, proposes, and turns each Ready into work: messages to
//     peers (sent at once), MsgStorageAppend for the appender and
//     MsgStorageApply for the applier. It never touches a disk, so
//     heartbeats and the lease go on while a large write is fsynced;
//   - the appender (append.go) writes the log: everything queued at once,
//     one synced batch, one fsync; then releases the responses raft
//     attached (acknowledgements to the leader, the self-ack);
//   - the applier (apply.go) applies committed entries to the state
//     database and answers the waiting Apply calls.

// loopState is what only the loop goroutine touches.
type loopState struct {
	rn *raft.RawNode

	confState  pb.ConfState
	peers      map[uint64]string // members' peer addresses
	wasLeader  bool
	leaderTerm uint64
	campaigned bool             // campaignAlone ran
	preVote    preVoteRetry     // see prevote.go
	acks       map[uint64]int64 // voter → latest echoed send time (this term)
	heard      map[uint64]int64 // peer → when (mono) its latest frame arrived
	// A new Session of fenceTerm waits until the applied index reaches
	// fenceIndex (the entries an ended Session may have left in the log).
	fenceIndex, fenceTerm uint64
	lastIndex             uint64 // the last index of the entries raft handed out
	// On a leader, this term: the last index of the entries it handed its
	// appender, and the highest the appender has written (propose.go:
	// while the first is ahead, new proposals wait to form one entry).
	leadAppending, leadAppended uint64
	appendWaitTicks             int // ticks the first has been ahead
	// confPending: a membership change proposed here is not applied
	// before this index (members.go).
	confPending uint64
	// snapHandedOut is the index of the latest snapshot handed to the
	// appender (stepSnapshot resets it to see whether raft took one).
	snapHandedOut uint64
	// A leadership transfer under way (balance.go): handingOver from its
	// start until raft's TimeoutNow leaves; while draining, the Session
	// takes no new batch and lives until those under way are answered
	// (or handDrainUntil, mono), then it ends and the lease margin runs.
	handingOver, handDraining bool
	handTo, handTerm          uint64
	handDrainUntil            int64
}

// initLoop builds the RawNode over the loaded log.
func (n *Node) initLoop(fresh bool) error {
	l := &n.loop
	l.acks = map[uint64]int64{}
	l.heard = map[uint64]int64{}
	l.peers = map[uint64]string{}
	for id, addr := range n.cfg.Peers {
		l.peers[id] = addr
	}
	_, cs, err := n.logs.mem.InitialState()
	if err != nil {
		return err
	}
	l.confState = cs
	n.publishVoters(cs)
	book, err := n.state.peerBook()
	if err != nil {
		return err
	}
	if learned := n.learnPeers(book, cs); len(learned) > 0 {
		n.log.Info("peer addresses of members --peers does not name, from the peer book", zap.Uint64s("ids", learned))
	}
	rc := &raft.Config{
		ID:                        n.id,
		ElectionTick:              n.cfg.ElectionTicks,
		HeartbeatTick:             1,
		Storage:                   n.logs.mem,
		Applied:                   n.apl.applied,
		AsyncStorageWrites:        true,
		MaxSizePerMsg:             maxMsgBytes,
		MaxCommittedSizePerReady:  64 << 20,
		MaxUncommittedEntriesSize: maxUncommittedBytes,
		MaxInflightMsgs:           maxInflight,
		CheckQuorum:               true,
		PreVote:                   true,
		DisableProposalForwarding: true,
		StepDownOnRemoval:         true,
		Logger:                    raftLogger{n.log.Named("raft").Sugar()},
	}
	if l.rn, err = raft.NewRawNode(rc); err != nil {
		return err
	}
	if fresh && !n.cfg.Join {
		peers := make([]raft.Peer, 0, len(n.cfg.Peers))
		for id, addr := range n.cfg.Peers {
			peers = append(peers, raft.Peer{ID: id, Context: []byte(addr)})
		}
		if err := l.rn.Bootstrap(peers); err != nil {
			return err
		}
	}
	return nil
}

// run is the loop.
func (n *Node) run() {
	defer close(n.loopDone)
	defer n.recoverInto("raft loop")
	tick := time.NewTicker(n.cfg.TickInterval)
	defer tick.Stop()
	l := &n.loop
	turn := time.Now()
	for {
		if d := time.Since(turn); d > 2*n.cfg.TickInterval {
			n.log.Warn("slow raft loop turn", zap.Duration("took", d))
		}
		select {
		case <-n.stopc:
			return
		case <-tick.C:
			l.preVote.tick(l.rn)
			n.tickProposals()
		case f := <-n.ctlc:
			n.stepFrame(f)
		case f := <-n.recvc:
			n.stepFrame(f)
		case s := <-n.snapc:
			n.stepSnapshot(s)
		case <-n.propc:
			n.proposeUnlessAppending()
		case <-n.inbox.ready():
			n.runInbox()
		}
		// Take whatever else is already waiting, so that one Ready (one
		// log write) covers it.
		for more := true; more; {
			select {
			case f := <-n.ctlc:
				n.stepFrame(f)
			case f := <-n.recvc:
				n.stepFrame(f)
			case <-n.propc:
				n.proposeUnlessAppending()
			case <-n.inbox.ready():
				n.runInbox()
			default:
				more = false
			}
		}
		turn = time.Now()
		n.handleReadies()
		if n.campaignAlone() {
			n.handleReadies()
		}
		n.updateServing()
	}
}

// runInbox runs the work other goroutines handed the loop, in order:
// responses of the appender and applier, conf changes, reports, status.
func (n *Node) runInbox() {
	for _, fn := range n.inbox.takeAll() {
		fn()
	}
}

// stepLocal steps a response the appender or applier released. Once the
// appender has written a leader's entries, what was proposed meanwhile
// goes into the log.
func (n *Node) stepLocal(m pb.Message) {
	if err := n.loop.rn.Step(m); err != nil {
		n.log.Debug("local message not stepped", zap.Stringer("type", m.Type), zap.Error(err))
	}
	if l := &n.loop; l.wasLeader && m.Type == pb.MsgStorageAppendResp && m.Index > l.leadAppended {
		l.leadAppended = m.Index
		n.proposeUnlessAppending()
	}
}

// campaignAlone makes the only voter of a group of one campaign at once
// (once its bootstrap is applied) instead of waiting out an election
// timeout: there is no one else to hear from.
func (n *Node) campaignAlone() bool {
	l := &n.loop
	if l.campaigned || len(l.confState.Voters) != 1 || l.confState.Voters[0] != n.id {
		return false
	}
	l.campaigned = true
	if l.rn.BasicStatus().RaftState == raft.StateLeader {
		return false
	}
	return l.rn.Campaign() == nil
}

// stepFrame steps a peer's messages and does the lease's bookkeeping.
func (n *Node) stepFrame(f *frame) {
	l := &n.loop
	now := n.mono()
	l.heard[f.from] = now
	holdVotes := now < n.voteHold
	reset := uint64(0) // the term of a timer-resetting message in f
	for i := range f.msgs {
		m := f.msgs[i]
		if holdVotes && (m.Type == pb.MsgVote || m.Type == pb.MsgPreVote) {
			continue
		}
		if resetsTimer(m.Type) {
			reset = m.Term
		}
		_ = l.rn.Step(m) // errors: a message from a removed peer, or stale
	}
	st := l.rn.BasicStatus()
	if reset != 0 && st.RaftState == raft.StateFollower && st.Lead == f.from && st.Term == reset {
		n.echoMu.Lock()
		n.echo = echoState{lead: f.from, term: reset, sent: f.sent}
		n.echoMu.Unlock()
	}
	if st.RaftState == raft.StateLeader && f.echoTerm == st.Term && f.echoSent > l.acks[f.from] {
		l.acks[f.from] = f.echoSent
		n.renewLease()
	}
}

// renewLease recomputes the lease from the voters' echoes: it runs until
// the quorum-th latest acknowledgement (the leader counting as now) plus
// the lease length.
func (n *Node) renewLease() {
	l := &n.loop
	times := make([]int64, 0, len(l.confState.Voters))
	for _, id := range l.confState.Voters {
		if id != n.id {
			times = append(times, l.acks[id])
		}
	}
	q, ok := quorumAck(times, len(l.confState.Voters))
	if !ok {
		return
	}
	until := int64(math.MaxInt64)
	if q < math.MaxInt64 {
		until = q + int64(n.cfg.lease())
	}
	if until > n.leaseUntil.Load() {
		n.leaseUntil.Store(until)
		if until > n.leaseHigh.Load() {
			n.leaseHigh.Store(until)
		}
	}
}

// quorumAck returns the time by which a majority of voters (the leader,
// counted as acknowledging always, and the followers whose latest
// acknowledged send times are given; 0 for none) had acknowledged: the
// k-th latest follower time, k being the acknowledgements a quorum needs
// besides the leader's own. A group of one needs none (MaxInt64). ok is
// false when not enough followers ever acknowledged.
func quorumAck(followers []int64, voters int) (int64, bool) {
	need := voters/2 + 1 - 1
	if need <= 0 {
		return math.MaxInt64, true
	}
	if len(followers) < need {
		return 0, false
	}
	sorted := append([]int64(nil), followers...)
	for i := 0; i < need; i++ { // partial selection sort: the need largest first
		for j := i + 1; j < len(sorted); j++ {
			if sorted[j] > sorted[i] {
				sorted[i], sorted[j] = sorted[j], sorted[i]
			}
		}
	}
	q := sorted[need-1]
	return q, q > 0
}

// leaseValid reports whether the lease holds now.
func (n *Node) leaseValid() bool { return n.mono() < n.leaseUntil.Load() }

// handleReadies turns every pending Ready into work.
func (n *Node) handleReadies() {
	l := &n.loop
	for l.rn.HasReady() {
		rd := l.rn.Ready()
		if rd.SoftState != nil {
			n.softState(*rd.SoftState)
		}
		if !raft.IsEmptyHardState(rd.HardState) {
			n.term.Store(rd.HardState.Term)
			n.commit.Store(rd.HardState.Commit)
		}
		if k := len(rd.Entries); k > 0 {
			l.lastIndex = max(l.lastIndex, rd.Entries[k-1].Index)
		}
		var out []pb.Message
		for _, m := range rd.Messages {
			switch m.To {
			case raft.LocalAppendThread:
				if m.Snapshot != nil && !raft.IsEmptySnap(*m.Snapshot) {
					l.snapHandedOut = m.Snapshot.Metadata.Index
				}
				if k := len(m.Entries); k > 0 && l.wasLeader {
					l.leadAppending = m.Entries[k-1].Index
				}
				n.appendQ.push(appendWork{m: m})
			case raft.LocalApplyThread:
				n.applyQ.push(applyWork{m: m})
			default:
				out = append(out, m)
			}
		}
		n.send(out)
	}
}

// softState follows raft's role changes: a leader that stops leading (or
// changes term) ends its Session before anything else of the Ready.
func (n *Node) softState(ss raft.SoftState) {
	l := &n.loop
	n.leader.Store(ss.Lead)
	term := l.rn.BasicStatus().Term
	n.term.Store(term)
	isLeader := ss.RaftState == raft.StateLeader
	if !isLeader || term != l.leaderTerm {
		n.leaseUntil.Store(0)
		clear(l.acks)
		n.mu.Lock()
		if n.sess != nil {
			n.endSessionLocked(n.sess, errNotLeader)
		}
		n.mu.Unlock()
	}
	if isLeader && !l.wasLeader {
		n.becameLeader.Store(n.mono())
	}
	if !isLeader || term != l.leaderTerm {
		l.leadAppending, l.leadAppended = 0, 0
	}
	if isLeader {
		l.leaderTerm = term
		n.renewLease() // a group of one holds it at once
	}
	l.wasLeader = isLeader
	n.log.Info("raft role", zap.Stringer("state", ss.RaftState), zap.Uint64("leader", ss.Lead), zap.Uint64("term", term))
	n.mu.Lock()
	n.broadcastLocked()
	n.mu.Unlock()
}

// send hands messages to the transport, grouped by peer, snapshots apart.
// A node whose disk is stuck sends nothing: it must not look alive to its
// peers (a leader would keep its lease while unable to commit).
func (n *Node) send(msgs []pb.Message) {
	if len(msgs) == 0 || n.stalled.Load() {
		return
	}
	byPeer := map[uint64][]pb.Message{}
	var order []uint64
	for _, m := range msgs {
		if m.Type == pb.MsgSnap {
			n.sendSnapshot(m)
			continue
		}
		if _, ok := byPeer[m.To]; !ok {
			order = append(order, m.To)
		}
		byPeer[m.To] = append(byPeer[m.To], m)
	}
	for _, to := range order {
		n.tr.send(to, byPeer[to])
	}
}

// sendSnapshot ships a checkpoint with m, reporting the outcome to raft.
func (n *Node) sendSnapshot(m pb.Message) {
	to := m.To
	n.tr.sendSnapshot(m, n.state.checkpoint, func(ok bool) {
		status := raft.SnapshotFinish
		if !ok {
			status = raft.SnapshotFailure
		}
		n.runOnLoop(func() { n.loop.rn.ReportSnapshot(to, status) })
	})
}

// stepSnapshot steps a received MsgSnap. Raft either takes the snapshot,
// handing it to the appender in the very next Ready (which then installs
// the checkpoint), or ignores it: a stale term, an index it has already
// committed (a snapshot sent again), one its log already holds. A
// checkpoint raft ignores is removed at once: it would double the disk
// used, on a node often already short of it.
func (n *Node) stepSnapshot(s snapIn) {
	l := &n.loop
	idx := s.m.Snapshot.Metadata.Index
	n.snapMu.Lock()
	// One at this index is taken already, waiting for its install: raft
	// has committed idx, so it ignores this one.
	_, pending := n.snapDirs[idx]
	if !pending {
		n.snapDirs[idx] = s.dir // before the Ready: the appender looks it up
	}
	n.snapMu.Unlock()
	l.snapHandedOut = 0
	_ = l.rn.Step(s.m)
	n.handleReadies()
	if !pending && l.snapHandedOut == idx {
		return
	}
	if !pending {
		n.snapMu.Lock()
		delete(n.snapDirs, idx)
		n.snapMu.Unlock()
	}
	removeAll(s.dir)
	n.log.Info("raft did not take a snapshot; its checkpoint is removed",
		zap.Uint64("index", idx), zap.Uint64("term", s.m.Snapshot.Metadata.Term), zap.Uint64("from", s.m.From))
}

// updateServing decides, after each turn of the loop, whether this node
// may start a Session: it leads, holds the lease, and has applied every
// entry of earlier terms (its own empty entry of this term is applied) and
// every entry an earlier Session of this term proposed (fenceIndex; in a
// later term the empty entry's rule covers them: what the log still holds
// of them is committed before it, the rest is gone for good).
func (n *Node) updateServing() {
	l := &n.loop
	st := l.rn.BasicStatus()
	leader := st.RaftState == raft.StateLeader
	applied, appliedTerm := n.appliedPos()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fenceAgain {
		n.fenceAgain = false
		last := max(l.lastIndex, st.Commit)
		if l.fenceTerm != st.Term {
			l.fenceIndex = 0
		}
		l.fenceIndex, l.fenceTerm = max(l.fenceIndex, last), st.Term
	}
	if n.sess != nil && (!leader || n.sess.term != st.Term) {
		n.endSessionLocked(n.sess, errNotLeader)
	}
	if l.handDraining && (n.sess == nil || len(n.queue)+len(n.waiting) == 0 || n.mono() >= l.handDrainUntil) {
		n.handOverLocked()
	}
	fenced := l.fenceTerm == st.Term && applied < l.fenceIndex
	// A leader handing its leadership over serves nothing meanwhile: the
	// transferee may be elected before this one's lease ends.
	transferring := st.LeadTransferee != 0
	if transferring && n.sess != nil {
		n.endSessionLocked(n.sess, errTransferring)
	}
	can := leader && appliedTerm == st.Term && !fenced && !transferring && !l.handingOver && !n.stalled.Load() &&
		n.leaseValid() && n.failed == nil && !n.closed
	if can != n.canServe {
		n.canServe = can
		n.broadcastLocked()
	}
}

// recoverInto turns a panic of one of the node's goroutines (raft's
// reaction to broken invariants, say) into a failed node.
func (n *Node) recoverInto(what string) {
	if p := recover(); p != nil {
		n.fail(fmt.Errorf("%w: %s: %v", storage.ErrUnavailable, what, p))
	}
}

package raftstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

// Membership changes (DESIGN.md, Membership): one at a time, asked of the
// leader. A new member first joins as a learner, which receives the log
// (or a snapshot) without voting, so that its catch-up cannot stall
// commits; once it has caught up it is promoted to voter. A member is
// removed in one step.

// NotLeaderError is what a membership change asked of a node that does
// not lead gets: Leader is the leader it knows (0: none).
type NotLeaderError struct{ Leader uint64 }

func (e *NotLeaderError) Error() string {
	if e.Leader == 0 {
		return "raftstore: this node does not lead, and knows no leader"
	}
	return fmt.Sprintf("raftstore: this node does not lead; node %d does", e.Leader)
}

// errChangePending refuses a membership change while another one is not
// yet applied.
var errChangePending = errors.New("raftstore: another membership change is under way; retry once it is applied")

// learnerLag is how far (in entries) behind the leader's commit index a
// learner may be when it is promoted.
const learnerLag = 64

// membershipPoll is how often a change's progress is checked.
const membershipPoll = 20 * time.Millisecond

// AddMember adds node id, whose peer transport listens at addr, to the
// group: as a learner, then, once its log is within a few entries of the
// leader's commit index, as a voter. It returns once the promotion is
// applied on this node, or with ctx's error (the change may then still
// complete). The node must be started with Config.Join and a peer list
// naming every member, itself included. Ask the leader; a follower
// answers [NotLeaderError].
func (n *Node) AddMember(ctx context.Context, id uint64, addr string) error {
	if id == 0 || addr == "" {
		return errors.New("raftstore: a new member needs an id > 0 and a peer address")
	}
	st, err := n.memberStatus(ctx)
	if err != nil {
		return err
	}
	if m, ok := memberOf(st, id); ok && m.Voter {
		return fmt.Errorf("raftstore: node %d is already a voting member", id)
	} else if !ok {
		if err := n.proposeConfChange(ctx, pb.ConfChange{Type: pb.ConfChangeAddLearnerNode, NodeID: id, Context: []byte(addr)}); err != nil {
			return err
		}
		if err := n.waitMembers(ctx, func(st Status) bool { _, ok := memberOf(st, id); return ok }); err != nil {
			return err
		}
		n.log.Info("learner added; waiting for it to catch up", zap.Uint64("id", id), zap.String("addr", addr))
	}
	if err := n.waitMembers(ctx, func(st Status) bool {
		m, _ := memberOf(st, id)
		return m.Progress == "StateReplicate" && m.Match+learnerLag >= st.Commit
	}); err != nil {
		return fmt.Errorf("raftstore: node %d did not catch up (is it running, with --join, at %s?): %w", id, addr, err)
	}
	if err := n.proposeConfChange(ctx, pb.ConfChange{Type: pb.ConfChangeAddNode, NodeID: id, Context: []byte(addr)}); err != nil {
		return err
	}
	return n.waitMembers(ctx, func(st Status) bool { m, ok := memberOf(st, id); return ok && m.Voter })
}

// RemoveMember removes node id from the group. It returns once the
// removal is applied on this node, or with ctx's error. Removing the
// leader itself makes it step down once the change is applied. Ask the
// leader; a follower answers [NotLeaderError].
func (n *Node) RemoveMember(ctx context.Context, id uint64) error {
	st, err := n.memberStatus(ctx)
	if err != nil {
		return err
	}
	if _, ok := memberOf(st, id); !ok {
		return fmt.Errorf("raftstore: node %d is not a member", id)
	}
	voters := 0
	for _, m := range st.Members {
		if m.Voter && m.ID != id {
			voters++
		}
	}
	if voters == 0 {
		return fmt.Errorf("raftstore: removing node %d would leave no voting member", id)
	}
	if err := n.proposeConfChange(ctx, pb.ConfChange{Type: pb.ConfChangeRemoveNode, NodeID: id}); err != nil {
		return err
	}
	if id == n.id {
		return nil // it no longer answers for the group
	}
	return n.waitMembers(ctx, func(st Status) bool { _, ok := memberOf(st, id); return !ok })
}

// proposeConfChange proposes cc on the loop, if this node leads and no
// other change is waiting to be applied.
func (n *Node) proposeConfChange(ctx context.Context, cc pb.ConfChange) error {
	errc := make(chan error, 1)
	n.runOnLoop(func() { errc <- n.tryConfChange(cc) })
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-n.stopc:
		return errors.New("raftstore: node closed")
	}
}

// tryConfChange (on the loop) proposes cc, or says why not.
func (n *Node) tryConfChange(cc pb.ConfChange) error {
	l := &n.loop
	st := l.rn.BasicStatus()
	if st.RaftState != raft.StateLeader {
		return &NotLeaderError{Leader: st.Lead}
	}
	applied, _ := n.appliedPos()
	if l.confPending > applied || n.confInLog(applied) {
		return errChangePending
	}
	if err := l.rn.ProposeConfChange(cc); err != nil {
		return fmt.Errorf("raftstore: proposing %s of node %d: %w", cc.Type, cc.NodeID, err)
	}
	// Its index is not known before the Ready; it is at least this.
	l.confPending = max(l.lastIndex, st.Commit) + 1
	n.log.Info("membership change proposed", zap.Stringer("type", cc.Type), zap.Uint64("id", cc.NodeID))
	return nil
}

// confInLog reports (on the loop) whether the log holds a conf change
// after applied: one a previous leader proposed, not yet applied here.
func (n *Node) confInLog(applied uint64) bool {
	last, err := n.logs.mem.LastIndex()
	if err != nil || last <= applied {
		return false
	}
	ents, err := n.logs.mem.Entries(applied+1, last+1, 64<<20)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if e.Type == pb.EntryConfChange || e.Type == pb.EntryConfChangeV2 {
			return true
		}
	}
	return false
}

// waitMembers polls the node's status until cond holds, ctx ends or the
// node stops leading.
func (n *Node) waitMembers(ctx context.Context, cond func(Status) bool) error {
	t := time.NewTicker(membershipPoll)
	defer t.Stop()
	for {
		st := n.Status()
		busy := st.Members == nil // the loop was too busy to answer: ask again
		if !busy && cond(st) {
			return nil
		}
		if !busy && st.State != raft.StateLeader.String() {
			return &NotLeaderError{Leader: st.Leader}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-n.stopc:
			return errors.New("raftstore: node closed")
		case <-t.C:
		}
	}
}

// memberStatus is the node's status as its loop sees it (with the
// members), asked again while the loop is too busy to answer.
func (n *Node) memberStatus(ctx context.Context) (Status, error) {
	var st Status
	err := n.waitMembers(ctx, func(s Status) bool { st = s; return true })
	var nl *NotLeaderError
	if errors.As(err, &nl) {
		err = nil // cond runs first: not reached
	}
	return st, err
}

func memberOf(st Status, id uint64) (Member, bool) {
	for _, m := range st.Members {
		if m.ID == id {
			return m, true
		}
	}
	return Member{}, false
}

package raftstore

import (
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	"go.uber.org/zap"
)

// Leadership balancing. Every node leads about as many data groups as
// every other, so that every node does a share of the broker's work: each
// data group has a preferred leader, which its placement record names
// (the meta leader spreads them over the members as replicas move:
// replicas.go, assignLeaders); until the first records are written, the
// (g-1)-th founding member in id order (the first of the three
// groupMembers gives it), so the groups go round the founders. Once a second each node hands the leadership of one
// group it leads but does not prefer to the preferred leader, when that
// one is a reachable voter holding the whole log (raft's leadership
// transfer: the target is brought up to date and campaigns at once,
// without waiting out an election timeout). A node that stops has its
// groups elected elsewhere by raft alone; when it comes back they return
// to it. The target is fixed, so two nodes never hand a group back and
// forth (counting leaders instead, each node over the groups it holds,
// did exactly that with five nodes, whose views differ).

// balanceEvery is how often a node looks at the leadership of its groups.
const balanceEvery = time.Second

// balance runs until the node closes.
func (h *host) balance(stop <-chan struct{}, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		h.balanceOnce()
	}
}

// balanceOnce hands over at most one group's leadership to its
// preferred leader.
func (h *host) balanceOnce() {
	h.mu.Lock()
	founders := h.record.Members
	h.mu.Unlock()
	placed := h.preferredLeaders()
	for _, n := range h.all() {
		if n.group == 0 || n.Leader() != h.id {
			continue
		}
		want, ok := placed[n.group]
		if !ok {
			want = preferredLeader(founders, n.group)
		}
		if want == 0 || want == h.id {
			continue
		}
		st := n.Status()
		if st.State != "StateLeader" {
			continue
		}
		ready := false
		for _, m := range st.Members {
			if m.ID == want && m.Voter && m.Reachable && m.Match >= st.LastIndex {
				ready = true
			}
		}
		if !ready {
			continue
		}
		n.log.Info("handing this group's leadership to its preferred leader", zap.Uint64("to", want))
		n.runOnLoop(func() { n.transferLeadership(want) })
		return
	}
}

// preferredLeader is the founding member that should lead data group g:
// the (g-1)-th in id order, so the groups go round the founders.
func preferredLeader(founders []uint64, g uint64) uint64 {
	if len(founders) == 0 || g == 0 {
		return 0
	}
	ids := slices.Clone(founders)
	slices.Sort(ids)
	return ids[int(g-1)%len(ids)]
}

// transferLeadership (on the loop) hands the group's leadership to node
// to, in three steps:
//
//  1. Drain: the Session takes no new batch (refused as not applied) and
//     lives on until the batches under way are committed and answered,
//     so that a hand-over leaves no write whose outcome is unknown (a
//     completion the client is told failed, which took effect). It ends
//     once none is left, or after an election timeout at most.
//  2. The lease margin (Config.leaseMargin) runs: the transferee is
//     elected without waiting out this leader's lease (a transfer's
//     campaign passes over the lease that makes voters refuse), so what
//     this one answered just before its Session ended, checked against
//     the lease, gets the time an election leaves it to reach its
//     client. Without it the partitioned soak caught a delivery of the
//     old leader reaching its client after the new leader had handed the
//     same message out again and confirmed its completion.
//  3. raft's TimeoutNow leaves (TransferLeader).
//
// No Session starts while the hand-over is under way (updateServing).
func (n *Node) transferLeadership(to uint64) {
	l := &n.loop
	if l.handingOver {
		return
	}
	l.handingOver, l.handDraining = true, true
	l.handTo, l.handTerm = to, l.rn.BasicStatus().Term
	l.handDrainUntil = n.mono() + int64(time.Duration(n.cfg.ElectionTicks)*n.cfg.TickInterval)
	n.mu.Lock()
	n.canServe = false
	if n.sess == nil || len(n.queue)+len(n.waiting) == 0 {
		n.handOverLocked()
	} else {
		n.draining = true
	}
	n.mu.Unlock()
}

// handOverLocked (on the loop, n.mu held) ends the drain of a hand-over:
// the Session ends, and raft's TimeoutNow leaves after the lease margin.
func (n *Node) handOverLocked() {
	l := &n.loop
	l.handDraining = false
	n.draining = false
	if n.sess != nil {
		n.endSessionLocked(n.sess, errTransferring)
	}
	to, term := l.handTo, l.handTerm
	time.AfterFunc(n.cfg.leaseMargin(), func() {
		n.runOnLoop(func() {
			l.handingOver = false
			if st := l.rn.BasicStatus(); st.RaftState == raft.StateLeader && st.Term == term {
				l.rn.TransferLeader(to)
			}
		})
	})
}

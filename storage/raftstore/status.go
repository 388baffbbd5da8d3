package raftstore

import (
	"sort"
	"time"

	dto "github.com/prometheus/client_model/go"
	"go.etcd.io/raft/v3"
)

// Status is what a node says about itself and, when it leads, about the
// other members' replication.
type Status struct {
	ID        uint64 `json:"id"`
	State     string `json:"state"` // StateLeader, StateFollower, ...
	Term      uint64 `json:"term"`
	Leader    uint64 `json:"leader"`
	Commit    uint64 `json:"commit"`
	Applied   uint64 `json:"applied"`
	LastIndex uint64 `json:"lastIndex"`
	// Snapshot is the index of the log's latest snapshot (compaction).
	Snapshot uint64 `json:"snapshot"`
	// SnapshotsInstalled counts the snapshots this node received and
	// installed since it started.
	SnapshotsInstalled int64 `json:"snapshotsInstalled,omitempty"`
	// ControlFramesDropped counts peers' frames without entries
	// (acknowledgements, heartbeats, votes) this group dropped since the
	// node started because its loop had ctlFrames of them waiting: raft
	// sends them again.
	ControlFramesDropped int64 `json:"controlFramesDropped,omitempty"`
	// Serving: the node has a live Session (its broker runs).
	Serving bool `json:"serving"`
	// ServingSince is when (wall clock) that Session began: no
	// acknowledgement of this term's leader comes before it.
	ServingSince time.Time `json:"servingSince,omitzero"`
	// LeaseMillis is what remains of the leader's lease.
	LeaseMillis int64 `json:"leaseMillis,omitempty"`
	// Stalled: a write of this node's disk is failing (it sends nothing
	// to its peers until the disk takes it).
	Stalled bool              `json:"stalled,omitempty"`
	Members []Member          `json:"members"`
	Client  map[string]string `json:"client,omitempty"` // client listener addresses
	Error   string            `json:"error,omitempty"`  // why the node stopped, if it did
	// Group is the Raft group this status is of (0: the meta group).
	Group uint64 `json:"group,omitempty"`
	// Groups summarizes, in the meta group's status, the data groups
	// this node holds (groups.go).
	Groups []GroupSummary `json:"groups,omitempty"`
}

// Member is one member of the group as this node sees it.
type Member struct {
	ID    uint64 `json:"id"`
	Addr  string `json:"addr"`
	Voter bool   `json:"voter"`
	// Match is the leader's view of the member's log (leader only).
	Match    uint64 `json:"match,omitempty"`
	Progress string `json:"progress,omitempty"`
	// HeardMillis is how long ago this node last received a frame from
	// the member, -1 if never since it started (and for itself, 0).
	// Raft's followers send nothing to each other: a follower hears only
	// its leader, which hears every member.
	HeardMillis int64 `json:"heardMillis"`
	// Reachable: the member is this node itself, or a frame from it
	// arrived within the election timeout.
	Reachable bool `json:"reachable"`
}

// Status reports the node's status. It asks the loop, and falls back to
// what other goroutines can see if the loop does not answer within a
// second (a loop stuck on its disk).
func (n *Node) Status() Status {
	ch := make(chan Status, 1)
	n.runOnLoop(func() { ch <- n.loopStatus() })
	select {
	case st := <-ch:
		return n.withShared(st)
	case <-time.After(time.Second):
	}
	return n.withShared(Status{ID: n.id, State: "unknown (the node's loop is busy)", Term: n.term.Load(),
		Leader: n.leader.Load(), Commit: n.commit.Load(), Applied: n.applied.Load(), Group: n.group})
}

// status implements handler.
func (n *Node) status() Status { return n.Status() }

// following implements handler.
func (n *Node) following() uint64 { return n.Leader() }

func (n *Node) withShared(st Status) Status {
	n.mu.Lock()
	st.Serving = n.sess != nil
	if n.sess != nil {
		st.ServingSince = n.sess.started
	}
	if n.failed != nil {
		st.Error = n.failed.Error()
	}
	n.mu.Unlock()
	if left := n.leaseUntil.Load() - n.mono(); left > 0 && st.State == raft.StateLeader.String() {
		st.LeaseMillis = min(left, int64(time.Hour)) / int64(time.Millisecond)
	}
	st.Client = n.clientInfoCopy()
	st.SnapshotsInstalled = n.snapshotsInstalled.Load()
	st.ControlFramesDropped = n.ctlDropped.Load()
	st.Stalled = n.stalled.Load()
	return st
}

// loopStatus is the loop's view.
func (n *Node) loopStatus() Status {
	l := &n.loop
	rs := l.rn.Status()
	st := Status{ID: n.id, State: rs.RaftState.String(), Term: rs.Term, Leader: rs.Lead,
		Commit: rs.Commit, Snapshot: n.snapshotIndex.Load(), Group: n.group}
	st.Applied, _ = n.appliedPos()
	st.LastIndex, _ = n.logs.mem.LastIndex()
	now := n.mono()
	electionTimeout := int64(time.Duration(n.cfg.ElectionTicks) * n.cfg.TickInterval)
	seen := map[uint64]bool{}
	add := func(id uint64, voter bool) {
		if seen[id] {
			return
		}
		seen[id] = true
		m := Member{ID: id, Addr: l.peers[id], Voter: voter, HeardMillis: -1}
		if id == n.id {
			m.HeardMillis, m.Reachable = 0, true
		} else if at, ok := l.heard[id]; ok {
			ago := now - at
			m.HeardMillis = ago / int64(time.Millisecond)
			m.Reachable = ago <= electionTimeout
		}
		if pr, ok := rs.Progress[id]; ok {
			m.Match, m.Progress = pr.Match, pr.State.String()
		}
		st.Members = append(st.Members, m)
	}
	for _, id := range l.confState.Voters {
		add(id, true)
	}
	for _, id := range l.confState.Learners {
		add(id, false)
	}
	sort.Slice(st.Members, func(i, j int) bool { return st.Members[i].ID < st.Members[j].ID })
	return st
}

// LogFsyncLatency reports the fdatasyncs of the Raft log's segment files
// (cumulative counts at upper bounds in nanoseconds, as
// pebblestore.Store.WALFsyncLatency); ok is false once the node is closed.
func (n *Node) LogFsyncLatency() (h *dto.Histogram, ok bool) { return n.logs.fsyncLatency() }

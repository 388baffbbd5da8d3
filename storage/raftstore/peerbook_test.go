package raftstore

import (
	"context"
	"testing"
	"time"
)

// TestRestartWithOldPeersFindsAddedMember: a member added at run time is
// known to a node restarted with the --peers it was first given (which
// does not name the new member), because the peer book in the state
// database remembers its address: the membership changes are behind a
// snapshot by then, so the log does not replay them. With only the
// restarted node and the added one left, they elect a leader and commit.
func TestRestartWithOldPeersFindsAddedMember(t *testing.T) {
	c := newTestCluster(t, 3, false, patientTiming)
	s, _ := c.session()
	mustPut(t, s, "before", "v")
	s.Close()

	n4, peers := c.startJoiner(4)

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := c.client().ChangeMembers(ctx, c.peers[2], MemberChange{Op: "add", ID: 4, Addr: peers[4]}); err != nil {
		t.Fatalf("adding node 4: %v", err)
	}
	if err := c.client().ChangeMembers(ctx, peers[4], MemberChange{Op: "remove", ID: 1}); err != nil {
		t.Fatalf("removing node 1: %v", err)
	}
	c.stop(1)
	// Node 2 snapshots after applying the removal: both changes are then
	// behind its snapshot, and a restart does not replay them.
	var removedAt uint64
	waitFor(t, "node 2 to apply the removal", func() bool {
		st := c.nodes[2].Status()
		_, member := memberOf(st, 1)
		removedAt = st.Applied
		return st.Members != nil && !member
	})
	waitFor(t, "node 2 to snapshot past the removal", func() bool { return c.nodes[2].Status().Snapshot >= removedAt })

	c.stop(2)
	c.stop(3) // the quorum of {2, 3, 4} is now node 2 with node 4
	n2 := c.start(2)
	if n2.cfg.Peers[4] != "" {
		t.Fatalf("node 2 restarted with peers %v: the test needs a list without node 4", n2.cfg.Peers)
	}
	waitFor(t, "node 2 to list its members", func() bool { return n2.Status().Members != nil })
	if m, ok := memberOf(n2.Status(), 4); !ok || m.Addr != peers[4] {
		t.Fatalf("node 2, restarted with the old --peers, knows node 4 as %+v (member %v); want address %s", m, ok, peers[4])
	}
	s, _ = c.session()
	defer s.Close()
	mustPut(t, s, "after", "v")
	for _, n := range []*Node{n2, n4} {
		waitFor(t, "both nodes to hold the write", func() bool { v, err := stateGet(n, "after"); return err == nil && v == "v" })
	}
}

package raftstore

import (
	"testing"
	"time"
)

// TestAppliedMovedTellsEveryMember: a channel taken from AppliedMoved is
// closed once the member applies a later write, on the leader and on a
// follower (which may hold its applies a moment), and one taken when the
// member has applied everything stays open until the next write.
func TestAppliedMovedTellsEveryMember(t *testing.T) {
	c := newTestCluster(t, 3, true, nil)
	s, leader := c.session()
	mustPut(t, s, "first", "1")
	for id, n := range c.nodes {
		waitFor(t, "every member to apply the first write", func() bool {
			v, err := stateGet(n, "first")
			return err == nil && v == "1"
		})
		if n.WaitApplied(t.Context(), c.nodes[leader].Applied()) != nil {
			t.Fatalf("node %d never applied the leader's position", id)
		}
	}
	moved := map[uint64]<-chan struct{}{}
	at := map[uint64]uint64{}
	for id, n := range c.nodes {
		moved[id] = n.AppliedMoved()
		at[id] = n.Applied()
	}
	for id, n := range c.nodes {
		select {
		case <-moved[id]:
			if n.Applied() == at[id] {
				t.Fatalf("node %d: AppliedMoved closed with nothing applied since", id)
			}
		default:
		}
	}
	mustPut(t, s, "second", "2")
	for id, n := range c.nodes {
		select {
		case <-moved[id]:
		case <-time.After(time.Minute):
			t.Fatalf("node %d: AppliedMoved not closed a minute after a write (applied %d, then %d)", id, at[id], n.Applied())
		}
		if n.Applied() <= at[id] {
			t.Fatalf("node %d: AppliedMoved closed, applied still %d", id, n.Applied())
		}
	}
}

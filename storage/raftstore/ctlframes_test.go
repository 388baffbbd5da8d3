package raftstore

import (
	"fmt"
	"testing"
	"time"
)

// TestOneGroupsBacklogDoesNotSilenceAnother: two nodes share one stream
// per lane for all their groups. Node f follows group A (led by node a)
// and leads group B; its loop of group A is stuck, with a full channel
// of A's entries, while a keeps sending it A's heartbeats over the
// stream that also carries a's acknowledgements of B. With B's third
// member stopped, f's lease and commits of B rest on those
// acknowledgements alone: B must keep its Session and commit. It failed
// (the Session ended with "lease lapsed") when every frame waited for
// room in its group's one channel, so that A's heartbeats held the
// stream.
func TestOneGroupsBacklogDoesNotSilenceAnother(t *testing.T) {
	c := newTestCluster(t, 3, false, func(cfg *Config) { cfg.Groups = 3 })
	c.waitLedAsPlaced(1, 3)
	recs := c.placementsOf(1)
	groupA, groupB := uint64(1), uint64(2)
	a, f := recs[groupA].Leader, recs[groupB].Leader
	if a == f {
		t.Fatalf("groups %d and %d are both led by node %d; the test needs two leaders", groupA, groupB, a)
	}
	third := 6 - a - f // nodes 1, 2, 3

	sB, id := c.groupSession(groupB)
	defer sB.Close()
	if id != f {
		t.Fatalf("group %d is served by node %d, placed on %d", groupB, id, f)
	}
	mustPut(t, sB, "b0", "before")

	stuck := c.nodes[f].GroupNode(groupA)
	holdLoop(t, stuck)
	sA, _ := c.groupSession(groupA)
	defer sA.Close()
	i := 0
	waitFor(t, fmt.Sprintf("node %d's stuck loop of group %d to have a channel's worth of frames waiting", f, groupA), func() bool {
		i++
		mustPut(t, sA, fmt.Sprint("a", i), "x") // commits on a and the third node
		return len(stuck.recvc)+len(stuck.ctlc) >= cap(stuck.recvc)
	})

	c.stop(third)
	end := time.Now().Add(2 * c.nodes[f].cfg.lease())
	for j := 1; time.Now().Before(end); j++ {
		mustPut(t, sB, fmt.Sprint("b", j), "with one follower")
	}
	if err := sB.Err(); err != nil {
		t.Fatalf("group %d's Session ended: %v", groupB, err)
	}
}

package raftstore

import (
	"fmt"
	"sync"
	"testing"
)

// TestWritesDuringALeaderAppendFormOneEntry: writes that arrive while the
// leader's own log write is under way wait and go into the log as one
// entry when it ends, not one entry each (proposeUnlessAppending). The
// leader's disk is frozen so that its first write stays under way while
// the others arrive.
func TestWritesDuringALeaderAppendFormOneEntry(t *testing.T) {
	c, disks := newFaultDiskCluster(t, 3, true) // patient: what waits is proposed anyway after 4 s (tickProposals)
	s, leader := c.session()
	mustPut(t, s, "before", "x")
	n := c.nodes[leader]
	first := n.Status().LastIndex

	n.mu.Lock()
	seq := n.nextSeq
	n.mu.Unlock()
	disks[leader].freeze()
	const writes = 40
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); mustPut(t, s, "w-first", "x") }()
	waitFor(t, "the first write to reach the leader's disk", func() bool {
		_, stuck := disks[leader].holding()
		return stuck > 0
	})
	for i := range writes - 1 {
		wg.Add(1)
		go func() { defer wg.Done(); mustPut(t, s, fmt.Sprintf("w%02d", i), "x") }()
	}
	waitFor(t, "the other writes to reach the leader", func() bool {
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.nextSeq-seq == writes
	})
	disks[leader].thaw()
	wg.Wait()

	if entries := n.Status().LastIndex - first; entries > 2 {
		t.Fatalf("%d writes, the first under way on the leader's disk while the rest arrived, took %d log entries; want 2", writes, entries)
	}
}

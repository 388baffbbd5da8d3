package raftstore

import (
	"strings"
	"testing"

	"github.com/omnibusmq/omnibus/storage"
)

// A batch larger than MaxBatchBytes would make an entry no follower takes
// (its frame would be over the cap): Apply refuses it before proposing,
// and the node goes on.
func TestBatchOverTheEntryBoundIsRefused(t *testing.T) {
	c := newTestCluster(t, 1, true, nil)
	s, _ := c.session()
	defer s.Close()
	n := c.nodes[1]
	before := n.Status().LastIndex
	b := &storage.Batch{Sync: true}
	b.Set([]byte("big"), make([]byte, MaxBatchBytes))
	if err := s.Apply(b); err == nil || !strings.Contains(err.Error(), "more than a Raft entry may carry") {
		t.Fatalf("Apply of a %d-byte value: %v, want refused", MaxBatchBytes, err)
	}
	if after := n.Status().LastIndex; after != before {
		t.Fatalf("the refused batch reached the log: last index %d, was %d", after, before)
	}
	mustPut(t, s, "small", "v")
}

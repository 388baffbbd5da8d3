package raftstore

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/storage/pebblestore"
)

// A backup taken on a follower that lags (its log disk frozen) holds
// every write the leader acknowledged before it began: the follower waits
// until it has applied the leader's commit index, then checkpoints.
func TestBackupOfALaggingFollowerHoldsEveryAcknowledgedWrite(t *testing.T) {
	c, disks := newFaultDiskCluster(t, 3, false)
	s, leader := c.session()
	defer s.Close()
	mustPut(t, s, "before", "v")
	follower := uint64(1)
	if follower == leader {
		follower = 2
	}
	waitFor(t, "the follower to apply", func() bool { v, err := stateGet(c.nodes[follower], "before"); return err == nil && v == "v" })

	disks[follower].freeze()
	t.Cleanup(disks[follower].thaw)
	for i := range 5 {
		mustPut(t, s, fmt.Sprintf("k%d", i), "v") // acknowledged by the leader and the third node
	}
	if _, err := stateGet(c.nodes[follower], "k4"); err == nil {
		t.Fatal("the frozen follower applied k4: the fault did not bite")
	}
	thaw := time.AfterFunc(500*time.Millisecond, disks[follower].thaw)
	defer thaw.Stop()
	dir := filepath.Join(t.TempDir(), "backup")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	info, err := c.nodes[follower].Backup(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if info.Leader != leader || info.Node != follower {
		t.Fatalf("backup info %+v: want node %d, leader %d", info, follower, leader)
	}
	db, err := pebblestore.Open(dir, pebblestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range 5 {
		if v, err := db.Get([]byte(fmt.Sprintf("%ck%d", dataPrefix, i))); err != nil || string(v) != "v" {
			t.Fatalf("the backup lacks k%d (%q, %v), acknowledged before it began", i, v, err)
		}
	}
}

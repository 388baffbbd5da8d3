package raftstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/storage"
)

func TestQuorumAck(t *testing.T) {
	for _, tc := range []struct {
		followers []int64
		voters    int
		want      int64
		ok        bool
	}{
		{nil, 1, math.MaxInt64, true},              // alone: no one to hear from
		{[]int64{5, 9}, 3, 9, true},                // one follower suffices
		{[]int64{0, 7}, 3, 7, true},                // one never answered
		{[]int64{0, 0}, 3, 0, false},               // none answered
		{[]int64{5, 9, 7}, 4, 7, true},             // 3 of 4: two followers
		{[]int64{5, 9, 7, 1}, 5, 7, true},          // 3 of 5
		{[]int64{0, 9, 0, 0}, 5, 0, false},         // 2 of 5 only
		{[]int64{4}, 2, 4, true},                   // two voters need both
		{[]int64{3, 8, 6, 2, 9, 1}, 7, 6, true},    // 4 of 7
		{[]int64{10, 10, 10}, 4, 10, true},         // ties
		{[]int64{1, 2, 3, 4, 5, 6}, 7, 4, true},    // sorted input
		{[]int64{6, 5, 4, 3, 2, 1}, 7, 4, true},    // reversed
		{[]int64{100, 0, 0, 0, 0, 0}, 7, 0, false}, // one of six
	} {
		got, ok := quorumAck(tc.followers, tc.voters)
		if got != tc.want || ok != tc.ok {
			t.Errorf("quorumAck(%v, %d) = %d, %t; want %d, %t", tc.followers, tc.voters, got, ok, tc.want, tc.ok)
		}
	}
}

// wall turns a node's monotonic reading into a wall time.
func wall(n *Node, mono int64) time.Time { return n.base.Add(time.Duration(mono)) }

// TestCutOffLeaderIsFenced: a leader cut off from the other two stops
// acknowledging, and its lease ends before the others elect a new leader;
// a write proposed on it fails (it does not hang), and it is not in the
// new leader's store: no majority ever stored it.
func TestCutOffLeaderIsFenced(t *testing.T) {
	c := newTestCluster(t, 3, true, nil)
	s1, old := c.session()
	mustPut(t, s1, "before", "1")

	c.net.isolate(old, true)
	during := make(chan error, 1)
	go func() {
		b := &storage.Batch{Sync: true}
		b.Set([]byte("during"), []byte("x"))
		during <- s1.Apply(b)
	}()
	select {
	case err := <-during:
		if !errors.Is(err, storage.ErrUnavailable) {
			t.Fatalf("Apply on a cut-off leader = %v, want an error wrapping ErrUnavailable", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Apply on a cut-off leader did not return")
	}
	<-s1.Done()
	if s1.Valid() {
		t.Fatal("the ended Session still says it is valid")
	}
	if err := s1.Apply(&storage.Batch{Ops: []storage.Op{{Kind: storage.OpSet, Key: []byte("k"), Value: []byte("v")}}}); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("Apply on an ended Session = %v, want ErrUnavailable", err)
	}
	if _, err := s1.Get([]byte("before")); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("Get on an ended Session = %v, want ErrUnavailable", err)
	}

	s2, now := c.session(old)
	if now == old {
		t.Fatalf("node %d served again while cut off", old)
	}
	oldLease := wall(c.nodes[old], c.nodes[old].leaseHigh.Load())
	elected := wall(c.nodes[now], c.nodes[now].becameLeader.Load())
	if !oldLease.Before(elected) {
		t.Fatalf("node %d's lease ran until %s, after node %d was elected at %s",
			old, oldLease.Format(time.StampMicro), now, elected.Format(time.StampMicro))
	}
	if v, err := s2.Get([]byte("before")); err != nil || string(v) != "1" {
		t.Fatalf("new leader: before = %q, %v", v, err)
	}
	if _, err := s2.Get([]byte("during")); !isNotFound(err) {
		t.Fatalf("new leader holds a write no majority stored: %v", err)
	}

	// Healed, the old leader follows: it catches up, and drops the write
	// its log held alone.
	c.net.isolate(old, false)
	mustPut(t, s2, "after", "2")
	waitFor(t, "the old leader to catch up", func() bool {
		v, err := stateGet(c.nodes[old], "after")
		return err == nil && v == "2"
	})
	if _, err := stateGet(c.nodes[old], "during"); !isNotFound(err) {
		t.Fatalf("old leader applied a write no majority stored: %v", err)
	}
}

// TestFollowerNeverServes: only the leader hands out a Session.
func TestFollowerNeverServes(t *testing.T) {
	c := newTestCluster(t, 3, true, nil)
	s, leader := c.session()
	mustPut(t, s, "k", "v")
	for id, n := range c.nodes {
		if id == leader {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		got, err := n.Session(ctx)
		cancel()
		if err == nil {
			t.Fatalf("follower %d handed out a Session (term %d) while %d leads", id, got.Term(), leader)
		}
	}
}

// TestNewLeaderHasEveryAcknowledgedWrite: the leader stops; the Session
// the next leader hands out reads every write the old one acknowledged,
// at once (it served only after applying them).
func TestNewLeaderHasEveryAcknowledgedWrite(t *testing.T) {
	c := newTestCluster(t, 3, true, nil)
	s1, old := c.session()
	const writers, each = 8, 40
	var mu sync.Mutex
	var acked []string
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				k := fmt.Sprintf("w%d/%03d", w, i)
				b := &storage.Batch{Sync: true}
				b.Set([]byte(k), []byte(k))
				if err := s1.Apply(b); err != nil {
					return // the leader stopped under us
				}
				mu.Lock()
				acked = append(acked, k)
				mu.Unlock()
			}
		})
	}
	waitFor(t, "some writes", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= writers*each/2
	})
	c.stop(old)
	wg.Wait()
	s2, _ := c.session()
	mu.Lock()
	defer mu.Unlock()
	for _, k := range acked {
		if v, err := s2.Get([]byte(k)); err != nil || string(v) != k {
			t.Fatalf("acknowledged %s missing on the new leader: %q, %v", k, v, err)
		}
	}
	t.Logf("%d acknowledged writes all on the new leader", len(acked))
}

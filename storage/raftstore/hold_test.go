package raftstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/storage"
)

// writeShortLived writes through s, in batches of ten, n messages as the
// core does (a state record and a body set, the state set again for a
// delivery count), then deletes every one but each tenth (the state
// record deleted, the body deleted once). It returns the keys left.
func writeShortLived(t *testing.T, s *Session, n int) []string {
	t.Helper()
	var left []string
	for i := 0; i < n; i += 10 {
		var send, deliver, complete storage.Batch
		send.Sync, complete.Sync = true, true
		for j := i; j < i+10; j++ {
			st, body := fmt.Sprintf("s/%04d", j), fmt.Sprintf("b/%04d", j)
			send.SetNew([]byte(st), []byte("count 0")) // as core's sends create it
			send.Set([]byte(body), []byte(fmt.Sprintf("body %d", j)))
			deliver.Set([]byte(st), []byte("count 1"))
			if j%10 == 0 {
				left = append(left, st, body)
				continue
			}
			complete.Delete([]byte(st))
			complete.DeleteOnce([]byte(body))
		}
		for _, b := range []*storage.Batch{&send, &deliver, &complete} {
			if err := s.Apply(b); err != nil {
				t.Fatalf("apply: %v", err)
			}
		}
	}
	return left
}

// TestFollowerHoldsAndCoalescesApplies: with a long hold, followers apply
// nothing of a burst of short-lived messages until asked (WaitApplied);
// then their state databases hold what the leader's does, and coalescing
// took the short-lived messages' operations out (the leader coalesces
// nothing).
func TestFollowerHoldsAndCoalescesApplies(t *testing.T) {
	c := newTestCluster(t, 3, true, func(cfg *Config) {
		patientTiming(cfg)
		cfg.FollowerApplyDelay = time.Hour
	})
	s, leader := c.session()
	defer s.Close()
	left := writeShortLived(t, s, 200)
	commit := c.nodes[leader].commit.Load()
	for id, n := range c.nodes {
		if id == leader {
			continue
		}
		// Knowing the commit index comes before the entries reach the
		// applier: wait until it holds them all, so that one run
		// coalesces the whole burst.
		waitFor(t, fmt.Sprintf("node %d to hold the entries through the commit index %d", id, commit), func() bool { return n.heldThrough.Load() >= commit })
		if got := n.applied.Load(); got >= commit {
			t.Fatalf("node %d (a follower, holding for an hour) applied %d of %d: it held nothing", id, got, commit)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := n.WaitApplied(ctx, commit)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range left {
			if _, err := stateGet(n, k); err != nil {
				t.Fatalf("node %d: %s: %v", id, k, err)
			}
		}
		for j := 1; j < 200; j += 7 {
			for _, k := range []string{fmt.Sprintf("s/%04d", j), fmt.Sprintf("b/%04d", j)} {
				if j%10 == 0 {
					continue
				}
				if v, err := stateGet(n, k); !isNotFound(err) {
					t.Fatalf("node %d: %s = %q, %v: want it deleted", id, k, v, err)
				}
			}
		}
		if v, _ := stateGet(n, "s/0010"); v != "count 1" {
			t.Fatalf("node %d: s/0010 = %q, want the delivery count's record", id, v)
		}
		if d := n.heldDropped.Load(); d < 180*5 {
			t.Fatalf("node %d: coalescing dropped %d operations, want at least 900 (all five of each of 180 messages)", id, d)
		}
	}
	if d := c.nodes[leader].heldDropped.Load(); d != 0 {
		t.Fatalf("the leader coalesced %d operations: it must apply at once", d)
	}
}

// TestNewLeaderAppliesWhatItHeld: a follower holding applies (for an
// hour) that becomes leader applies them before it serves: every message
// left is there, every one deleted is gone.
func TestNewLeaderAppliesWhatItHeld(t *testing.T) {
	c := newTestCluster(t, 3, true, func(cfg *Config) {
		testTiming(cfg)
		cfg.FollowerApplyDelay = time.Hour
	})
	s, leader := c.session()
	left := writeShortLived(t, s, 100)
	s.Close()
	c.stop(leader)
	s2, next := c.session(leader)
	defer s2.Close()
	if next == leader {
		t.Fatal("the stopped leader served")
	}
	for _, k := range left {
		if _, err := s2.Get([]byte(k)); err != nil {
			t.Fatalf("new leader %d: %s: %v", next, k, err)
		}
	}
	for _, k := range []string{"s/0001", "b/0001", "s/0099", "b/0099"} {
		if v, err := s2.Get([]byte(k)); !isNotFound(err) {
			t.Fatalf("new leader %d: %s = %q, %v: want it deleted", next, k, v, err)
		}
	}
}

// TestHeldAppliesSurviveLeaderChanges writes messages' records as the
// core does (set, set again, delete, delete once) through whichever node
// leads, stopping the leader every 40 batches and starting it again, with
// followers holding their applies. In the end every node's state
// database holds exactly the records the acknowledged batches leave: a
// record deleted is never back, one written is never lost.
func TestHeldAppliesSurviveLeaderChanges(t *testing.T) {
	c := newTestCluster(t, 3, true, func(cfg *Config) {
		testTiming(cfg)
		cfg.FollowerApplyDelay = 300 * time.Millisecond
	})
	want := map[string]string{} // key → value the acknowledged batches leave ("" deleted)
	unsure := map[string]bool{} // keys a batch with an unknown outcome touched
	s, leader := c.session()
	apply := func(b *storage.Batch) {
		if err := s.Apply(b); err != nil {
			for _, op := range b.Ops {
				unsure[string(op.Key)] = true
			}
			s.Close()
			s, leader = c.session()
			return
		}
		for _, op := range b.Ops {
			k := string(op.Key)
			if op.Kind == storage.OpSet {
				want[k] = string(op.Value)
			} else {
				want[k] = ""
			}
		}
	}
	stopped := uint64(0)
	for round := range 240 {
		if round > 0 && round%40 == 0 {
			if stopped != 0 {
				c.start(stopped)
			}
			s.Close()
			stopped = leader
			c.stop(leader)
			s, leader = c.session(stopped)
		}
		var send, deliver, complete storage.Batch
		send.Sync, complete.Sync = true, true
		for j := round * 10; j < round*10+10; j++ {
			st, body := fmt.Sprintf("s/%05d", j), fmt.Sprintf("b/%05d", j)
			send.SetNew([]byte(st), []byte("count 0")) // as core's sends create it
			send.Set([]byte(body), []byte(fmt.Sprintf("body %d", j)))
			deliver.Set([]byte(st), []byte("count 1"))
			if j%3 == 0 {
				continue // stays
			}
			complete.Delete([]byte(st))
			complete.DeleteOnce([]byte(body))
		}
		apply(&send)
		apply(&deliver)
		apply(&complete)
	}
	if stopped != 0 {
		c.start(stopped)
	}
	commit := c.nodes[leader].commit.Load()
	s.Close()
	for id, n := range c.nodes {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		waitFor(t, fmt.Sprintf("node %d to learn the commit index", id), func() bool { return n.commit.Load() >= commit })
		err := n.WaitApplied(ctx, commit)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		checked := 0
		for k, v := range want {
			if unsure[k] {
				continue
			}
			got, err := stateGet(n, k)
			switch {
			case v == "" && !isNotFound(err):
				t.Fatalf("node %d: %s = %q, %v: it was deleted", id, k, got, err)
			case v != "" && (err != nil || got != v):
				t.Fatalf("node %d: %s = %q, %v: want %q", id, k, got, err, v)
			}
			checked++
		}
		if checked < 2000 {
			t.Fatalf("node %d: only %d keys checked", id, checked)
		}
	}
}

// TestRipeAppliesWhatWaitedThreeQuarters: nothing is applied before the
// oldest held item has waited the delay; then every item held three
// quarters of it, and the younger stay; and the oldest go too while what
// stays is over the bound.
func TestRipeAppliesWhatWaitedThreeQuarters(t *testing.T) {
	const d = 100 * time.Millisecond
	var h heldApplies
	for _, at := range []time.Duration{0, 20 * time.Millisecond, 30 * time.Millisecond, 60 * time.Millisecond} {
		h.items = append(h.items, heldItem{at: int64(at), bytes: 1 << 20})
		h.bytes += 1 << 20
	}
	if k := h.ripe(int64(99*time.Millisecond), d); k != 0 {
		t.Fatalf("before the oldest waited the delay: %d ripe, want 0", k)
	}
	if k := h.ripe(int64(100*time.Millisecond), d); k != 2 {
		t.Fatalf("once the oldest waited the delay: %d ripe, want 2 (held 100 and 80 ms; 70 and 40 stay)", k)
	}
	if k := h.ripe(int64(106*time.Millisecond), d); k != 3 {
		t.Fatalf("at 106 ms: %d ripe, want 3", k)
	}
	h.bytes = maxHeldApplyBytes + 3<<20 // as if the items were bigger
	if k := h.ripe(int64(50*time.Millisecond), d); k != 3 {
		t.Fatalf("held over the bound by 3 MiB: %d ripe, want the 3 oldest", k)
	}
}

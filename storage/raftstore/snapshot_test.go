package raftstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/omnibusmq/omnibus/storage"
)

// TestLaggingFollowerGetsACheckpoint: a follower that was down while the
// log was compacted past it catches up from a Pebble checkpoint sent over
// the HTTP/2 transport, then from the log.
func TestLaggingFollowerGetsACheckpoint(t *testing.T) {
	c := newTestCluster(t, 3, false, func(cfg *Config) {
		patientTiming(cfg)
		cfg.SnapshotEntries, cfg.catchUp, cfg.lagging = 20, 5, -1
	})
	s, leader := c.session()
	down := uint64(1)
	if down == leader {
		down = 2
	}
	c.stop(down)
	for i := range 150 {
		b := &storage.Batch{Sync: true}
		b.Set(fmt.Appendf(nil, "k%03d", i), fmt.Appendf(nil, "v%d", i))
		b.Delete(fmt.Appendf(nil, "k%03d", i-100))
		if err := s.Apply(b); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the log to be compacted", func() bool {
		return c.nodes[leader].snapshotIndex.Load() > 20
	})
	n := c.start(down)
	mustPut(t, s, "after", "restart")
	waitFor(t, "the restarted follower to catch up", func() bool {
		v, err := stateGet(n, "after")
		return err == nil && v == "restart"
	})
	// The counter moves just after the swap that made "after" readable.
	waitFor(t, "the follower to count the snapshot it installed", func() bool {
		return n.snapshotsInstalled.Load() > 0
	})
	for i := range 150 {
		v, err := stateGet(n, fmt.Sprintf("k%03d", i))
		if i < 50 {
			if !isNotFound(err) {
				t.Fatalf("k%03d = %q, %v; want deleted", i, v, err)
			}
			continue
		}
		if err != nil || v != fmt.Sprint("v", i) {
			t.Fatalf("k%03d = %q, %v", i, v, err)
		}
	}
	st := n.Status()
	if st.Applied < st.Snapshot || st.SnapshotsInstalled == 0 {
		t.Fatalf("status after catch-up: %+v", st)
	}
}

// TestLaggingFollowerCatchesUpFromTheLog: a follower down while the
// leader compacted its log many times over, past the catch-up margin,
// catches up from the log its leader kept for it (up to laggingBytes),
// with no snapshot; the next compaction after it caught up drops that
// log again.
func TestLaggingFollowerCatchesUpFromTheLog(t *testing.T) {
	c := newTestCluster(t, 3, false, func(cfg *Config) {
		patientTiming(cfg)
		cfg.SnapshotEntries, cfg.catchUp = 20, 5
	})
	s, leader, down := c.stopAFollower(t)
	for i := range 150 {
		mustPut(t, s, fmt.Sprintf("k%03d", i), fmt.Sprint(i))
	}
	waitFor(t, "the log to be compacted past the margin", func() bool {
		return c.nodes[leader].snapshotIndex.Load() > 100
	})
	ld := c.nodes[leader]
	first, _ := ld.logs.mem.FirstIndex()
	if first > 10 {
		t.Fatalf("the leader kept its log from %d on; the follower that stopped has matched less", first)
	}
	n := c.restartCaughtUp(t, s, ld, down)
	for i := range 150 {
		if v, err := stateGet(n, fmt.Sprintf("k%03d", i)); err != nil || v != fmt.Sprint(i) {
			t.Fatalf("k%03d = %q, %v", i, v, err)
		}
	}
	if got := n.snapshotsInstalled.Load(); got != 0 {
		t.Fatalf("the follower installed %d snapshots; want it to catch up from the log", got)
	}
	for i := range 40 { // two compactions more, every follower matched
		mustPut(t, s, fmt.Sprintf("m%03d", i), "x")
	}
	waitFor(t, "the leader to drop the log it kept", func() bool {
		first, _ := ld.logs.mem.FirstIndex()
		return first > 100
	})
}

// A follower further behind than the lagging margin needs a snapshot
// whatever the leader keeps, so the leader keeps only the catch-up margin
// for it rather than the newest bytes of the lagging one, and the
// follower, back, catches up from a snapshot.
func TestFollowerBeyondTheLaggingMarginGetsNoMargin(t *testing.T) {
	c := newTestCluster(t, 3, false, func(cfg *Config) {
		patientTiming(cfg)
		cfg.SnapshotEntries, cfg.catchUp, cfg.lagging = 20, 5, 1<<20
	})
	s, leader, down := c.stopAFollower(t)
	big := strings.Repeat("v", 64<<10)
	for i := range 160 { // 10 MiB: beyond the margins' 8
		mustPut(t, s, fmt.Sprintf("k%03d", i), big)
	}
	ld := c.nodes[leader]
	waitFor(t, "the log to be compacted past the margin", func() bool {
		return ld.snapshotIndex.Load() > 150
	})
	snap := ld.snapshotIndex.Load()
	if first, _ := ld.logs.mem.FirstIndex(); first+5 < snap {
		t.Fatalf("the leader kept its log from %d on, %d entries behind its snapshot at %d, for a follower no kept log can serve",
			first, snap-first, snap)
	}
	n := c.restartCaughtUp(t, s, ld, down)
	if v, err := stateGet(n, "k159"); err != nil || v != big {
		t.Fatalf("k159 on the follower: %d bytes, %v", len(v), err)
	}
	if got := n.snapshotsInstalled.Load(); got == 0 {
		t.Fatal("the follower caught up with no snapshot; want one")
	}
}

// stopAFollower stops a follower of the group once it has applied a
// first write, returning a session on the leader, the leader and the
// stopped follower.
func (c *testCluster) stopAFollower(t *testing.T) (*Session, uint64, uint64) {
	t.Helper()
	s, leader := c.session()
	down := uint64(1)
	if down == leader {
		down = 2
	}
	mustPut(t, s, "before", "stop")
	waitFor(t, "the follower to have the first write", func() bool {
		v, err := stateGet(c.nodes[down], "before")
		return err == nil && v == "stop"
	})
	c.stop(down)
	return s, leader, down
}

// restartCaughtUp starts node down again, writes once more through s and
// waits until the node has applied everything leader ld had then.
// Applied, not the write readable: a snapshot's checkpoint may hold it
// before its install is counted; the entries behind it are applied, and
// counted applied, only once the install is.
func (c *testCluster) restartCaughtUp(t *testing.T, s *Session, ld *Node, down uint64) *Node {
	t.Helper()
	n := c.start(down)
	mustPut(t, s, "after", "restart")
	want, _ := ld.appliedPos()
	waitFor(t, "the restarted follower to catch up", func() bool {
		got, _ := n.appliedPos()
		return got >= want
	})
	return n
}

// TestRestartKeepsEverything: the whole group stops and starts again on
// its directories; every acknowledged write is there, on every node.
func TestRestartKeepsEverything(t *testing.T) {
	c := newTestCluster(t, 3, false, func(cfg *Config) {
		patientTiming(cfg)
		cfg.SnapshotEntries, cfg.catchUp = 50, 10
	})
	s, _ := c.session()
	for i := range 120 {
		mustPut(t, s, fmt.Sprintf("k%03d", i), fmt.Sprint(i))
	}
	c.closeAll()
	for id := range c.dirs {
		c.start(id)
	}
	s, _ = c.session()
	for i := range 120 {
		if v, err := s.Get(fmt.Appendf(nil, "k%03d", i)); err != nil || string(v) != fmt.Sprint(i) {
			t.Fatalf("after restart k%03d = %q, %v", i, v, err)
		}
	}
	mustPut(t, s, "after", "restart")
	for id, n := range c.nodes {
		waitFor(t, fmt.Sprintf("node %d to apply", id), func() bool {
			v, err := stateGet(n, "after")
			return err == nil && v == "restart"
		})
	}
}

// A checkpoint that arrives with a snapshot raft does not take (sent
// again, at an index the follower has committed; or from a past term) is
// removed at once, not kept until a newer install or a restart.
func TestIgnoredSnapshotIsRemoved(t *testing.T) {
	c := newTestCluster(t, 3, true, patientTiming)
	s, leader := c.session()
	for i := range 10 {
		mustPut(t, s, fmt.Sprintf("k%d", i), "v")
	}
	f := c.nodes[leader%3+1]
	waitFor(t, "the follower to apply", func() bool { v, err := stateGet(f, "k9"); return err == nil && v == "v" })
	term, commit := f.Term(), f.commit.Load()
	for _, tc := range []struct {
		name        string
		term, index uint64
	}{
		{"sent again", term, commit},
		{"from a past term", term - 1, commit + 100},
	} {
		dir, err := f.newScratch("in")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "000001.sst"), make([]byte, 4096), 0o644); err != nil {
			t.Fatal(err)
		}
		m := pb.Message{Type: pb.MsgSnap, From: leader, To: f.id, Term: tc.term, Snapshot: &pb.Snapshot{
			Metadata: pb.SnapshotMetadata{Index: tc.index, Term: tc.term, ConfState: pb.ConfState{Voters: []uint64{1, 2, 3}}}}}
		if err := f.receiveSnapshot(m, dir); err != nil {
			t.Fatal(err)
		}
		stepped := make(chan struct{})
		f.runOnLoop(func() { close(stepped) }) // runs after the step
		<-stepped
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: the checkpoint of a snapshot raft ignored is still there (%v)", tc.name, err)
		}
		f.snapMu.Lock()
		if len(f.snapDirs) != 0 {
			t.Errorf("%s: checkpoints kept for an install: %v", tc.name, f.snapDirs)
		}
		f.snapMu.Unlock()
	}
	mustPut(t, s, "after", "v") // the follower still follows
	waitFor(t, "the follower to apply after", func() bool { v, err := stateGet(f, "after"); return err == nil && v == "v" })
}

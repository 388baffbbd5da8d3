package raftstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"path/filepath"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap/zaptest"

	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
)

// TestAddAndReplaceMember: over the real HTTP/2 transport, a fourth node
// started with Join is added through a follower's peer API (which finds
// the leader): it catches up from a snapshot (the log was compacted
// before it came), votes, and holds every write; then a dead member is
// removed, and the three left commit without it; a second change while
// one is under way, a change asked of a follower, and a removal of a
// stranger are refused.
func TestAddAndReplaceMember(t *testing.T) {
	c := newTestCluster(t, 3, false, func(cfg *Config) {
		patientTiming(cfg)
		cfg.SnapshotEntries, cfg.catchUp = 20, 5
	})
	s, _ := c.session()
	// put writes through the serving leader; on a loaded machine a lease
	// may lapse and leadership move: then it writes through the next one.
	put := func(key string) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			b := &storage.Batch{Sync: true}
			b.Set([]byte(key), []byte("v"))
			err := s.Apply(b)
			if err == nil {
				return
			}
			if !errors.Is(err, storage.ErrUnavailable) || time.Now().After(deadline) {
				t.Fatalf("Apply %s: %v", key, err)
			}
			s.Close()
			s, _ = c.session()
		}
	}
	// leaderOf returns the node that leads now, waiting for one.
	leaderOf := func() (uint64, *Node) {
		t.Helper()
		var id uint64
		waitFor(t, "a leader", func() bool {
			for i, n := range c.nodes {
				if n.Status().State == "StateLeader" {
					id = i
					return true
				}
			}
			return false
		})
		return id, c.nodes[id]
	}
	for i := range 60 { // past a compaction: the new node needs a snapshot
		put(fmt.Sprintf("k%02d", i))
	}
	waitFor(t, "a log compaction", func() bool { _, l := leaderOf(); return l.Status().Snapshot > 20 })

	n4, peers := c.startJoiner(4)
	if st := n4.Status(); len(st.Members) != 0 || st.Serving {
		t.Fatalf("a joining node before it is added: %+v, want no members and not serving", st)
	}

	leader, _ := leaderOf()
	follower := uint64(1)
	if follower == leader {
		follower = 2
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var nl *NotLeaderError
	if err := c.nodes[follower].AddMember(ctx, 4, peers[4]); !errors.As(err, &nl) {
		t.Fatalf("AddMember on follower %d: %v, want NotLeaderError", follower, err)
	}
	cl := c.client()
	if err := cl.ChangeMembers(ctx, c.peers[follower], MemberChange{Op: "remove", ID: 9}); err == nil {
		t.Fatal("removing node 9, which never was a member: no error")
	}

	if err := cl.ChangeMembers(ctx, c.peers[follower], MemberChange{Op: "add", ID: 4, Addr: peers[4]}); err != nil {
		t.Fatalf("adding node 4 through follower %d: %v", follower, err)
	}
	_, l := leaderOf()
	st := l.Status()
	if m, ok := memberOf(st, 4); !ok || !m.Voter {
		t.Fatalf("after the add, the leader's members are %+v: want 4 voting", st.Members)
	}
	waitFor(t, "node 4 to apply the leader's commit", func() bool { return n4.Status().Applied >= st.Commit })
	if s4 := n4.Status(); s4.SnapshotsInstalled == 0 {
		t.Fatalf("node 4 caught up without a snapshot, though the log was compacted before it came: %+v", s4)
	}
	for i := range 60 {
		if v, err := stateGet(n4, fmt.Sprintf("k%02d", i)); err != nil || v != "v" {
			t.Fatalf("node 4 has k%02d = %q, %v; want v", i, v, err)
		}
	}

	// Replace a dead member: stop one of the first three that does not
	// lead, then remove it. Four voters need three; after the removal
	// three need two.
	leader, _ = leaderOf()
	dead := uint64(1)
	for dead == leader {
		dead++
	}
	c.stop(dead)
	if err := cl.ChangeMembers(ctx, peers[4], MemberChange{Op: "remove", ID: dead}); err != nil {
		t.Fatalf("removing dead node %d: %v", dead, err)
	}
	if _, l := leaderOf(); func() bool { _, ok := memberOf(l.Status(), dead); return ok }() {
		t.Fatalf("node %d still a member after its removal", dead)
	}
	put("after-removal")
	waitFor(t, "node 4 to apply the write made without the removed node", func() bool {
		v, err := stateGet(n4, "after-removal")
		return err == nil && v == "v"
	})

	// One change at a time: of two proposed in one turn of the leader's
	// loop, the second is refused.
	for {
		_, l := leaderOf()
		errs := make(chan [2]error, 1)
		l.runOnLoop(func() {
			errs <- [2]error{
				l.tryConfChange(pb.ConfChange{Type: pb.ConfChangeAddLearnerNode, NodeID: 7, Context: []byte("127.0.0.1:1")}),
				l.tryConfChange(pb.ConfChange{Type: pb.ConfChangeAddLearnerNode, NodeID: 8, Context: []byte("127.0.0.1:1")}),
			}
		})
		got := <-errs
		if errors.As(got[0], &nl) {
			continue // leadership moved meanwhile (load)
		}
		if got[0] != nil || !errors.Is(got[1], errChangePending) {
			t.Fatalf("two membership changes in one turn: %v, %v; want nil, then the pending-change error", got[0], got[1])
		}
		break
	}
}

// startJoiner starts node id with Join (no bootstrap: it waits to be
// added) on a port of its own, with patient timing, and returns it with
// the peer list that names it. It gets its certificate as an operator's
// new node does: with a join token a member made.
func (c *testCluster) startJoiner(id uint64) (*Node, map[uint64]string) {
	c.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.t.Fatal(err)
	}
	peers := maps.Clone(c.peers)
	peers[id] = ln.Addr().String()
	var issuer uint64
	for m := range c.nodes {
		issuer = max(issuer, m)
	}
	tok, err := c.client().JoinToken(c.t.Context(), c.peers[issuer], id, 0)
	if err != nil {
		c.t.Fatalf("a join token for node %d from node %d: %v", id, issuer, err)
	}
	creds, err := Enroll(c.t.Context(), tok, id)
	if err != nil {
		c.t.Fatalf("node %d joining with a token: %v", id, err)
	}
	c.creds[id] = creds
	cfg := Config{ID: id, Peers: peers, Join: true, Dir: filepath.Join(c.t.TempDir(), fmt.Sprintf("node%d", id)), Listener: ln,
		TLS: creds, Admin: testAdmin,
		Logger: zaptest.NewLogger(c.t).Named(fmt.Sprint("n", id)), Store: pebblestore.Options{LazySyncDelay: 50 * time.Millisecond}}
	patientTiming(&cfg)
	n, err := Open(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	c.nodes[id] = n
	c.mu.Unlock()
	return n, peers
}

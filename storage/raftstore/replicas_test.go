package raftstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/storage"
)

// placementsOf reads the placement records of node id's replica of the
// meta group.
func (c *testCluster) placementsOf(id uint64) map[uint64]placement {
	c.t.Helper()
	recs, err := c.nodes[id].state.placements()
	if err != nil {
		c.t.Fatalf("node %d's placement records: %v", id, err)
	}
	return recs
}

// settled reports whether the placement of groups data groups is at
// rest, as node from's meta replica says it, and true on the nodes: no
// move under way; each group's leader has the record's members as its
// voters, and no learner; and each node runs exactly the groups it holds.
func (c *testCluster) settled(from uint64, groups int) (map[uint64]placement, string) {
	recs := c.placementsOf(from)
	if len(recs) != groups {
		return recs, fmt.Sprintf("%d records", len(recs))
	}
	for g := uint64(1); g <= uint64(groups); g++ {
		p := recs[g]
		if p.moving() {
			return recs, fmt.Sprintf("group %d moving: %+v", g, p)
		}
		led := false
		for id, n := range c.nodes {
			gn := n.GroupNode(g)
			if holds := slices.Contains(p.Members, id); holds != (gn != nil) {
				return recs, fmt.Sprintf("node %d runs group %d: %v, holds it: %v", id, g, gn != nil, holds)
			}
			if gn != nil && gn.Leader() == id {
				s := gn.groupSummary()
				if !slices.Equal(s.Voters, p.Members) || len(s.Learners) > 0 {
					return recs, fmt.Sprintf("group %d: voters %v, learners %v; record %v", g, s.Voters, s.Learners, p.Members)
				}
				led = true
			}
		}
		if !led {
			return recs, fmt.Sprintf("group %d has no leader", g)
		}
	}
	return recs, ""
}

// waitSettled waits (up to two minutes) for settled, and for even to
// hold of the records (nil: always).
func (c *testCluster) waitSettled(from uint64, groups int, even func(map[uint64]placement) string) map[uint64]placement {
	c.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		recs, why := c.settled(from, groups)
		if why == "" && even != nil {
			why = even(recs)
		}
		if why == "" {
			return recs
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the placement did not settle: %s; records %+v", why, recs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitLedAsPlaced waits (up to a minute) for each of the groups data
// groups to be led by the preferred leader node from's records name: until
// then the balancer may hand a group over (balance.go), which ends the
// Session a test writes through, refusing its next write.
func (c *testCluster) waitLedAsPlaced(from uint64, groups int) {
	c.t.Helper()
	waitFor(c.t, "every data group led by its preferred leader", func() bool {
		recs := c.placementsOf(from)
		for g := uint64(1); g <= uint64(groups); g++ {
			n := c.nodes[recs[g].Leader]
			if n == nil {
				return false
			}
			if gn := n.GroupNode(g); gn == nil || gn.Leader() != gn.ID() {
				return false
			}
		}
		return true
	})
}

// heldBy counts the replicas each node holds by the records.
func heldBy(recs map[uint64]placement) map[uint64]int {
	out := map[uint64]int{}
	for _, p := range recs {
		for _, m := range p.Members {
			out[m]++
		}
	}
	return out
}

// groupWriter writes keys to data group g through whichever node serves
// it, until stopped, and keeps those acknowledged.
type groupWriter struct {
	c     *testCluster
	g     uint64
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
	mu    sync.Mutex
	acked []string
}

func (c *testCluster) startWriter(g uint64) *groupWriter {
	w := &groupWriter{c: c, g: g, stop: make(chan struct{}), done: make(chan struct{})}
	c.t.Cleanup(func() { w.finish() }) // before the nodes close, if the test ends first
	go func() {
		defer close(w.done)
		var s *Session
		for i := 0; ; {
			select {
			case <-w.stop:
				if s != nil {
					s.Close()
				}
				return
			default:
			}
			if s == nil || s.Err() != nil {
				s = w.session()
				if s == nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
			}
			key := fmt.Sprintf("w%d-%05d", g, i)
			b := &storage.Batch{Sync: true}
			b.Set([]byte(key), []byte("v"))
			if err := s.Apply(b); err != nil {
				if !errors.Is(err, storage.ErrUnavailable) {
					c.t.Errorf("group %d: Apply %s: %v", g, key, err)
					return
				}
				continue // its outcome is unknown: the key is not counted, and the next one is another
			}
			w.mu.Lock()
			w.acked = append(w.acked, key)
			w.mu.Unlock()
			i++
		}
	}()
	return w
}

// session finds a node serving the writer's group now (nil: none yet).
func (w *groupWriter) session() *Session {
	w.c.mu.Lock()
	nodes := slices.Collect(maps.Values(w.c.nodes))
	w.c.mu.Unlock()
	for _, n := range nodes {
		gn := n.GroupNode(w.g)
		if gn == nil || gn.Leader() != gn.ID() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		s, err := gn.Session(ctx)
		cancel()
		if err == nil {
			return s
		}
	}
	return nil
}

// finish stops the writer and returns the keys acknowledged.
func (w *groupWriter) finish() []string {
	w.once.Do(func() { close(w.stop) })
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.acked
}

// checkKeys reads every key through group g's serving leader.
func (c *testCluster) checkKeys(g uint64, keys []string) {
	c.t.Helper()
	s, id := c.groupSession(g)
	defer s.Close()
	for _, k := range keys {
		if v, err := s.Get([]byte(k)); err != nil || string(v) != "v" {
			c.t.Fatalf("group %d on node %d: %s = %q, %v; it was acknowledged", g, id, k, v, err)
		}
	}
}

// joinMember starts node id with Join and adds it to the cluster (the
// meta group), as `omnibus cluster add` does.
func (c *testCluster) joinMember(id uint64) {
	c.t.Helper()
	_, peers := c.startJoiner(id)
	ctx, cancel := context.WithTimeout(c.t.Context(), 2*time.Minute)
	defer cancel()
	if err := c.client().ChangeMembers(ctx, c.peers[1], MemberChange{Op: "add", ID: id, Addr: peers[id]}); err != nil {
		c.t.Fatalf("adding node %d: %v", id, err)
	}
	c.peers = peers
}

// TestReplicasMoveToJoiningNodes: three nodes hold three data groups, all
// of them each; a fourth and a fifth node join the cluster, and replicas
// move onto them, one at a time, until the nine replicas are spread
// evenly: each of the five nodes holds one or two (9 = 4×2 + 1), every
// group has three voters, and each node runs exactly the groups it
// holds. Writes acknowledged before and during the moves are all there.
func TestReplicasMoveToJoiningNodes(t *testing.T) {
	c := newTestCluster(t, 3, false, func(cfg *Config) { cfg.Groups = 3 })
	recs := c.waitSettled(1, 3, nil)
	if held := heldBy(recs); held[1] != 3 || held[2] != 3 || held[3] != 3 {
		t.Fatalf("before the joins: %v", held)
	}
	c.waitLedAsPlaced(1, 3)
	var writers []*groupWriter
	for g := uint64(1); g <= 3; g++ {
		s, _ := c.groupSession(g)
		mustPut(t, s, fmt.Sprint("before-", g), "v")
		s.Close()
		writers = append(writers, c.startWriter(g))
	}
	c.joinMember(4)
	c.joinMember(5)
	// The writers run through the moves. Even, for 3 groups × 3 replicas
	// over 5 nodes: each holds ⌊9/5⌋ = 1 to ⌈9/5⌉ = 2, 9 in all.
	recs = c.waitSettled(1, 3, func(recs map[uint64]placement) string {
		held, total := heldBy(recs), 0
		for id := uint64(1); id <= 5; id++ {
			total += held[id]
			if held[id] < 1 || held[id] > 2 {
				return fmt.Sprintf("node %d holds %d replicas, want 1 or 2 (9 over 5 nodes): %v", id, held[id], held)
			}
		}
		if total != 9 {
			return fmt.Sprintf("%d replicas, want 9: %v", total, held)
		}
		return ""
	})
	for id := uint64(1); id <= 5; id++ {
		if got, held := len(c.nodes[id].Groups())-1, heldBy(recs)[id]; got != held {
			t.Errorf("node %d runs %d data groups, holds %d", id, got, held)
		}
	}
	for g := uint64(1); g <= 3; g++ {
		keys := writers[g-1].finish()
		if len(keys) == 0 {
			t.Errorf("group %d: no write acknowledged during the moves", g)
		}
		c.checkKeys(g, append(keys, fmt.Sprint("before-", g)))
		t.Logf("group %d: %d writes acknowledged during the moves, on %v, led by %d", g, len(keys), recs[g].Members, recs[g].Leader)
	}
	// Leadership follows: each node leads at most one group (3 over 5).
	waitFor(t, "every data group led by the leader its record names", func() bool {
		recs := c.placementsOf(1)
		for g, p := range recs {
			if gn := c.nodes[p.Leader].GroupNode(g); gn == nil || gn.Leader() != p.Leader {
				return false
			}
		}
		return true
	})
	leaders := map[uint64]int{}
	for _, p := range c.placementsOf(1) {
		leaders[p.Leader]++
	}
	for id, k := range leaders {
		if k > 1 {
			t.Errorf("node %d leads %d groups: %v", id, k, leaders)
		}
	}
}

// TestRemovedMemberIsReplaced: four nodes hold three data groups (node 3
// all of them); node 3 dies and is removed from the cluster (`omnibus
// cluster remove`): each of its groups gets a replacement replica on the
// nodes left, and is back to three voters, 1, 2 and 4, with every write
// acknowledged before.
func TestRemovedMemberIsReplaced(t *testing.T) {
	c := newTestCluster(t, 4, false, func(cfg *Config) { cfg.Groups = 3 })
	recs := c.waitSettled(1, 3, nil)
	c.waitLedAsPlaced(1, 3)
	for g := uint64(1); g <= 3; g++ {
		if !slices.Contains(recs[g].Members, 3) {
			t.Fatalf("group %d is not on node 3: %+v", g, recs[g])
		}
		s, _ := c.groupSession(g)
		for i := range 20 {
			mustPut(t, s, fmt.Sprintf("k%d-%d", g, i), "v")
		}
		s.Close()
	}
	c.stop(3)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := c.client().ChangeMembers(ctx, c.peers[1], MemberChange{Op: "remove", ID: 3}); err != nil {
		t.Fatalf("removing node 3: %v", err)
	}
	recs = c.waitSettled(1, 3, func(recs map[uint64]placement) string {
		for g, p := range recs {
			if !slices.Equal(p.Members, []uint64{1, 2, 4}) {
				return fmt.Sprintf("group %d on %v", g, p.Members)
			}
		}
		return ""
	})
	for g := uint64(1); g <= 3; g++ {
		var keys []string
		for i := range 20 {
			keys = append(keys, fmt.Sprintf("k%d-%d", g, i))
		}
		c.checkKeys(g, keys)
		for _, id := range recs[g].Members {
			gn := c.nodes[id].GroupNode(g)
			waitFor(t, fmt.Sprintf("node %d's replica of group %d to hold its writes", id, g), func() bool {
				v, err := stateGet(gn, keys[len(keys)-1])
				return err == nil && v == "v"
			})
		}
	}
}

// TestMoverKilledMidMove: a move is held after its learner caught up,
// before its promotion; the node carrying it out (the group's leader) is
// killed there. The group goes on serving without it (the learner never
// counted for its quorum), and once the node is back the move completes,
// with every write acknowledged before.
func TestMoverKilledMidMove(t *testing.T) {
	var hold atomic.Bool
	hold.Store(true)
	var held atomic.Uint64 // the group held at its promotion
	c := newTestCluster(t, 3, false, func(cfg *Config) {
		cfg.Groups = 3
		cfg.moveStep = func(g uint64, step string) bool {
			if step == "promote" && hold.Load() {
				held.CompareAndSwap(0, g)
				return false
			}
			return true
		}
	})
	c.waitSettled(1, 3, nil)
	c.waitLedAsPlaced(1, 3)
	for g := uint64(1); g <= 3; g++ {
		s, _ := c.groupSession(g)
		mustPut(t, s, fmt.Sprint("before-", g), "v")
		s.Close()
	}
	c.joinMember(4)
	waitFor(t, "a move held before its promotion", func() bool { return held.Load() != 0 })
	g := held.Load()
	var mover uint64
	waitFor(t, "the held group's leader", func() bool {
		for id, n := range c.nodes {
			if gn := n.GroupNode(g); gn != nil && gn.Leader() == id {
				mover = id
				return true
			}
		}
		return false
	})
	if p := c.placementsOf(mover)[g]; p.Add != 4 {
		t.Fatalf("group %d's record while its move is held: %+v", g, p)
	}
	c.stop(mover)
	s, id := c.groupSession(g, mover)
	if v, err := s.Get([]byte(fmt.Sprint("before-", g))); err != nil || string(v) != "v" {
		t.Fatalf("group %d on node %d after the mover died: %q, %v", g, id, v, err)
	}
	mustPut(t, s, "after", "v")
	s.Close()
	hold.Store(false)
	c.start(mover)
	recs := c.waitSettled(1, 3, func(recs map[uint64]placement) string {
		if !slices.Contains(recs[g].Members, 4) {
			return fmt.Sprintf("group %d on %v", g, recs[g].Members)
		}
		return ""
	})
	t.Logf("group %d moved to %v", g, recs[g].Members)
	c.checkKeys(g, []string{fmt.Sprint("before-", g), "after"})
}

// TestUnreachableMemberIsReplaced: a member out of the meta leader's
// reach for longer than ReplaceAfter, though still a member, has its
// replicas replaced on the others; when it comes back it drops the groups
// it lost (their directories go) and receives its share again.
func TestUnreachableMemberIsReplaced(t *testing.T) {
	c := newTestCluster(t, 4, false, func(cfg *Config) { cfg.Groups = 3; cfg.ReplaceAfter = 2 * time.Second })
	c.waitSettled(1, 3, nil)
	c.stop(3)
	recs := c.waitSettled(1, 3, func(recs map[uint64]placement) string {
		for g, p := range recs {
			if slices.Contains(p.Members, 3) {
				return fmt.Sprintf("group %d still on %v", g, p.Members)
			}
		}
		return ""
	})
	for g, p := range recs {
		if !slices.Equal(p.Members, []uint64{1, 2, 4}) {
			t.Fatalf("group %d on %v after node 3 went out of reach", g, p.Members)
		}
	}
	n3 := c.start(3)
	// Back, it holds no group until replicas move to it: 9 over 4 nodes
	// is 2 or 3 each.
	c.waitSettled(1, 3, func(recs map[uint64]placement) string {
		if held := heldBy(recs); held[3] < 2 {
			return fmt.Sprintf("node 3 holds %d", held[3])
		}
		return ""
	})
	for g := uint64(1); g <= 3; g++ {
		if n3.GroupNode(g) == nil {
			if _, err := os.Stat(groupDir(c.dirs[3], g)); err == nil {
				t.Errorf("node 3 holds no group %d, yet keeps its directory", g)
			}
		}
	}
}

func TestAssignLeadersSpreadsEvenly(t *testing.T) {
	// Four groups on four nodes, the fourth group's members leading one
	// each already: a leader of two hands one to the node leading none.
	recs := map[uint64]placement{
		1: {Group: 1, Members: []uint64{1, 2, 4}, Leader: 1},
		2: {Group: 2, Members: []uint64{2, 3, 4}, Leader: 2},
		3: {Group: 3, Members: []uint64{1, 3, 4}, Leader: 3},
		4: {Group: 4, Members: []uint64{1, 2, 3}, Leader: 1},
	}
	assignLeaders(recs, []uint64{1, 2, 3, 4})
	leads := map[uint64]int{}
	for _, p := range recs {
		leads[p.Leader]++
	}
	if leads[1] != 1 || leads[2] != 1 || leads[3] != 1 || leads[4] != 1 {
		t.Fatalf("leaders %v, want one group each: %+v", leads, recs)
	}
}

package raftstore

import (
	"context"
	"errors"
	"maps"
	"os"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/storage"
)

// Replica moves (DESIGN.md, "Placement of the groups"). Three parts, each
// driven by the placement records of the meta group (placement.go), on
// every node, every placeEvery:
//
//   - the meta leader plans (planMoves): it writes the first records, one
//     move at a time in the whole cluster (a record with Add/Remove), and
//     the record without the move once the group's leader reports the
//     group's voters are the move's target;
//   - the leader of a data group carries a move out (stepMove), one
//     membership change per turn, each a plain etcd raft conf change: the
//     new member joins as a learner (it catches up by snapshot and log
//     without counting for a quorum), is promoted once caught up, then
//     the member it replaces is removed (after handing the leadership
//     away, if it is that member). No step leaves the group without a
//     quorum of caught-up voters;
//   - every node runs the groups its replica of the meta group says it
//     holds (runPlaced): it opens a group it is being added to (empty,
//     waiting to be contacted) and closes, and deletes, one it no longer
//     holds once the move that took it away is done.
//
// Every decision is read again from the records at each turn: a node
// killed in the middle of a move (the meta leader, the group's leader, the
// node being added) leaves the record as it was, and whoever leads next
// goes on from where the group stands.

// placeEvery is how often a node looks at the placement records.
const placeEvery = 250 * time.Millisecond

// DefaultReplaceAfter is how long a member may be out of the meta
// leader's reach before its replicas are replaced (Config.ReplaceAfter).
const DefaultReplaceAfter = 5 * time.Minute

// moverState is the placement loop's own (one goroutine).
type moverState struct {
	term     uint64               // the meta term lastSeen was begun in
	lastSeen map[uint64]time.Time // member → when the meta leader last reached it
	sent     map[uint64]placement // records proposed, not yet seen applied
	sentAt   time.Time
}

// placeLoop runs the placement's three parts until quit closes.
func (h *host) placeLoop(quit <-chan struct{}) {
	t := time.NewTicker(placeEvery)
	defer t.Stop()
	for {
		select {
		case <-quit:
			return
		case <-t.C:
		}
		h.placeOnce(quit)
	}
}

func (h *host) placeOnce(quit <-chan struct{}) {
	meta := h.node(0)
	if meta == nil {
		return
	}
	recs, err := meta.state.placements()
	if err != nil {
		return
	}
	h.learnGroupCount(recs)
	h.runPlaced(meta, recs, quit)
	for _, g := range slices.Sorted(maps.Keys(recs)) {
		if p := recs[g]; p.moving() {
			if n := h.node(g); n != nil && n.Leader() == h.id {
				h.stepMove(meta, n, p, quit)
			}
		}
	}
	h.planMoves(meta, recs)
}

// learnGroupCount raises the node's count of data groups to what the
// records name (a node that joined learns it so), and keeps it in
// groups.json for the next start.
func (h *host) learnGroupCount(recs map[uint64]placement) {
	top := 0
	for g := range recs {
		top = max(top, int(g))
	}
	h.mu.Lock()
	if top <= h.record.Groups {
		h.mu.Unlock()
		return
	}
	h.record.Groups = top
	rec := h.record
	h.mu.Unlock()
	if err := writeGroupsRecord(h.cfg.Dir, rec); err != nil {
		h.cfg.Logger.Warn("cannot record the count of data groups", zap.Error(err))
	}
}

// addresses are the peer addresses this node knows: the meta group's
// peer book, then Config.Peers, which wins.
func (h *host) addresses(meta *Node) map[uint64]string {
	book, err := meta.state.peerBook()
	if err != nil {
		book = map[uint64]string{}
	}
	maps.Copy(book, h.cfg.Peers)
	return book
}

func peersOf(ids []uint64, addrs map[uint64]string) map[uint64]string {
	out := map[uint64]string{}
	for _, id := range ids {
		if a := addrs[id]; a != "" {
			out[id] = a
		}
	}
	return out
}

// runPlaced opens the groups the records say this node holds and it does
// not run, and drops those it runs and no longer holds (once its replica
// of the meta group has caught up with the leader's commit: a lagging
// replica may show an older record).
func (h *host) runPlaced(meta *Node, recs map[uint64]placement, quit <-chan struct{}) {
	caughtUp := meta.Leader() != 0 && meta.applied.Load() >= meta.commit.Load()
	for _, g := range slices.Sorted(maps.Keys(recs)) {
		p := recs[g]
		holds := slices.Contains(p.holders(), h.id)
		n := h.node(g)
		switch {
		case holds && n == nil:
			if err := h.openLater(g, peersOf(p.holders(), h.addresses(meta)), quit); err != nil {
				h.cfg.Logger.Warn("cannot open a data group placed on this node", zap.Uint64("group", g), zap.Error(err))
			}
		case !holds && n != nil && caughtUp && n.Leader() != h.id:
			h.drop(n)
		}
	}
}

// dataConfig is the Config of this node's member of data group g.
func (h *host) dataConfig(g uint64, peers map[uint64]string, join bool) Config {
	gc := h.cfg
	gc.Dir = groupDir(h.cfg.Dir, g)
	gc.Peers = peers
	gc.Join = join
	gc.Listener = nil
	return gc
}

// openLater opens data group g at run time, as a member waiting to be
// added (it never bootstraps), and starts it.
func (h *host) openLater(g uint64, peers map[uint64]string, quit <-chan struct{}) error {
	gc := h.dataConfig(g, peers, true)
	if err := os.MkdirAll(gc.Dir, 0o755); err != nil {
		return err
	}
	n, err := openGroup(gc, h, g)
	if err != nil {
		return err
	}
	h.mu.Lock()
	select {
	case <-quit: // the node is closing: Close no longer sees new groups
		h.mu.Unlock()
		return errors.Join(n.logs.close(), n.state.close())
	default:
	}
	h.nodes[g] = n
	h.mu.Unlock()
	for id, addr := range n.loop.peers {
		if id != n.id {
			n.tr.setPeer(id, addr)
		}
	}
	n.start()
	n.log.Info("opened a data group placed on this node; waiting to be added")
	h.notifyChanged()
	return nil
}

// drop closes this node's member of a group it no longer holds and
// deletes its directory.
func (h *host) drop(n *Node) {
	h.mu.Lock()
	delete(h.nodes, n.group) // its frames are dropped from now on
	h.mu.Unlock()
	if err := n.closeGroup(); err != nil && !errors.Is(err, storage.ErrClosed) {
		n.log.Warn("closing a data group this node no longer holds", zap.Error(err))
	}
	for id := range n.loop.peers { // the loop has stopped
		if id != n.id {
			h.tr.removePeer(n.group, id)
		}
	}
	if n.logs.shared() {
		if err := n.logs.forget(); err != nil {
			n.log.Warn("cannot write that a data group left the node's log; the next start drops it", zap.Error(err))
		}
	}
	if err := os.RemoveAll(n.cfg.Dir); err != nil {
		n.log.Warn("cannot delete the directory of a data group this node no longer holds", zap.Error(err))
	}
	n.log.Info("dropped a data group moved to other nodes")
	h.notifyChanged()
}

// notifyChanged wakes GroupsChanged's waiters.
func (h *host) notifyChanged() {
	h.mu.Lock()
	close(h.changed)
	h.changed = make(chan struct{})
	h.mu.Unlock()
}

// GroupsChanged returns a channel closed when this node next opens or
// drops a data group at run time (a replica moved to or from it):
// Groups then lists the groups it runs.
func (n *Node) GroupsChanged() <-chan struct{} {
	n.host.mu.Lock()
	defer n.host.mu.Unlock()
	return n.host.changed
}

// Done is closed once the node (this group's member) is closed.
func (n *Node) Done() <-chan struct{} { return n.stopc }

// stepMove (on the leader of p's group, n) makes the next membership
// change of the move under way, if it may be made now.
func (h *host) stepMove(meta *Node, n *Node, p placement, quit <-chan struct{}) {
	st := n.Status()
	if st.State != raft.StateLeader.String() || st.Members == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go func() {
		select {
		case <-quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	// caughtUp counts the voters (and add, if given) reachable and
	// within learnerLag of the commit index, leaving out skip.
	caughtUp := func(add, skip uint64) (ok, voters int) {
		for _, m := range st.Members {
			if m.ID == skip || (!m.Voter && m.ID != add) {
				continue
			}
			voters++
			if m.Reachable && (m.ID == n.id || m.Match+learnerLag >= st.Commit) {
				ok++
			}
		}
		return ok, voters
	}
	change := func(step string, cc pb.ConfChange) {
		if hook := h.cfg.moveStep; hook != nil && !hook(n.group, step) {
			return
		}
		if err := n.proposeConfChange(ctx, cc); err != nil && !errors.Is(err, errChangePending) {
			n.log.Warn("replica move: conf change not proposed", zap.String("step", step), zap.Error(err))
		}
	}
	if p.Add != 0 {
		m, ok := memberOf(st, p.Add)
		switch {
		case !ok:
			addr := h.addresses(meta)[p.Add]
			if addr == "" {
				n.log.Warn("replica move: no peer address for the node to add", zap.Uint64("id", p.Add))
				return
			}
			change("learner", pb.ConfChange{Type: pb.ConfChangeAddLearnerNode, NodeID: p.Add, Context: []byte(addr)})
			return
		case !m.Voter:
			if m.Progress != "StateReplicate" || m.Match+learnerLag < st.Commit {
				return // catching up
			}
			// Promoted, it counts for the quorum: the voters caught up
			// with it must make one of the larger group.
			if ok, voters := caughtUp(p.Add, 0); ok < voters/2+1 {
				return
			}
			change("promote", pb.ConfChange{Type: pb.ConfChangeAddNode, NodeID: p.Add, Context: []byte(h.addresses(meta)[p.Add])})
			return
		}
	}
	if p.Remove == 0 {
		return
	}
	m, ok := memberOf(st, p.Remove)
	if !ok {
		return
	}
	if p.Remove == n.id {
		// Hand the leadership over first: a leader that removes itself
		// leaves the group leaderless for an election timeout.
		var to uint64
		for _, c := range st.Members {
			if c.Voter && c.ID != n.id && c.Reachable && c.Match >= st.LastIndex && (to == 0 || c.ID == p.Leader) {
				to = c.ID
			}
		}
		if to != 0 {
			n.log.Info("replica move: handing the leadership over before leaving the group", zap.Uint64("to", to))
			n.runOnLoop(func() { n.transferLeadership(to) })
		}
		return
	}
	if m.Voter {
		if ok, voters := caughtUp(0, p.Remove); ok < voters/2+1 {
			return // the voters left would not make a caught-up quorum
		}
	}
	change("remove", pb.ConfChange{Type: pb.ConfChangeRemoveNode, NodeID: p.Remove})
}

// planMoves (on the meta leader, once it has applied its own term's
// entries) writes the first placement records, ends the move under way
// once done, or plans the next one; and assigns each group's preferred
// leader.
func (h *host) planMoves(meta *Node, recs map[uint64]placement) {
	mv := &h.mover
	if meta.Leader() != h.id {
		mv.lastSeen, mv.sent = nil, nil
		return
	}
	h.mu.Lock()
	groups, founders := h.record.Groups, h.record.Members
	h.mu.Unlock()
	if groups == 0 {
		return // no data groups
	}
	if _, term := meta.appliedPos(); term != meta.Term() {
		return
	}
	for g, p := range mv.sent {
		if !placementEqual(recs[g], p) && time.Since(mv.sentAt) < 2*time.Second {
			return // what was proposed is not applied yet
		}
	}
	mv.sent = nil
	st := meta.Status()
	if st.State != raft.StateLeader.String() || st.Members == nil {
		return
	}
	now := time.Now()
	if mv.lastSeen == nil || mv.term != st.Term {
		mv.lastSeen, mv.term = map[uint64]time.Time{}, st.Term
	}
	voters := map[uint64]bool{}
	var live []uint64
	for _, m := range st.Members {
		if !m.Voter {
			continue
		}
		voters[m.ID] = true
		if seen, ok := mv.lastSeen[m.ID]; m.Reachable || !ok || seen.IsZero() {
			mv.lastSeen[m.ID] = now
		}
		if h.cfg.ReplaceAfter < 0 || now.Sub(mv.lastSeen[m.ID]) < h.cfg.ReplaceAfter {
			live = append(live, m.ID)
		}
	}
	next := maps.Clone(recs)
	missing := false
	for g := uint64(1); g <= uint64(groups); g++ {
		if _, ok := next[g]; !ok {
			next[g] = placement{Group: g, Members: groupMembers(founders, g)}
			missing = true
		}
	}
	if !missing {
		if p, ok := pendingMove(next); ok {
			if np, changed := h.followMove(meta, st, p, live); changed {
				next[p.Group] = np
			}
		} else if p, ok := planMove(next, live, voters); ok {
			meta.log.Info("replica move planned", zap.Uint64("group", p.Group), zap.Uint64("add", p.Add), zap.Uint64("remove", p.Remove))
			next[p.Group] = p
		}
	}
	assignLeaders(next, live)
	var writes []placement
	for _, g := range slices.Sorted(maps.Keys(next)) {
		if p, ok := recs[g]; !ok || !placementEqual(p, next[g]) {
			writes = append(writes, next[g])
		}
	}
	if len(writes) == 0 {
		return
	}
	if err := meta.proposePlacements(writes); err != nil {
		return
	}
	mv.sent, mv.sentAt = map[uint64]placement{}, now
	for _, p := range writes {
		mv.sent[p.Group] = p
	}
}

// pendingMove is the move under way, if any (there is at most one).
func pendingMove(recs map[uint64]placement) (placement, bool) {
	for _, g := range slices.Sorted(maps.Keys(recs)) {
		if recs[g].moving() {
			return recs[g], true
		}
	}
	return placement{}, false
}

// followMove returns p's next record: without the move once the group's
// leader reports the move's target as its voters (and no learner), or
// the move turned back when the node being added is gone before it
// votes (the learner is removed instead).
func (h *host) followMove(meta *Node, st Status, p placement, live []uint64) (placement, bool) {
	gs, ok := h.groupView(meta, st, p.Group)
	if !ok {
		return p, false
	}
	if slices.Equal(gs.Voters, p.target()) && len(gs.Learners) == 0 {
		meta.log.Info("replica move done", zap.Uint64("group", p.Group), zap.Uint64s("members", gs.Voters))
		p.Members, p.Add, p.Remove = p.target(), 0, 0
		return p, true
	}
	if p.Add != 0 && !slices.Contains(live, p.Add) && !slices.Contains(gs.Voters, p.Add) {
		meta.log.Info("replica move turned back: the node being added is gone", zap.Uint64("group", p.Group), zap.Uint64("node", p.Add))
		p.Add, p.Remove = 0, p.Add
		return p, true
	}
	return p, false
}

// groupView is what group g's leader says of the group: this node's own
// member when it leads, else asked of each member in turn.
func (h *host) groupView(meta *Node, st Status, g uint64) (GroupSummary, bool) {
	if n := h.node(g); n != nil && n.Leader() == h.id {
		return n.groupSummary(), true
	}
	for _, m := range st.Members {
		if m.ID == h.id || m.Addr == "" || !m.Reachable {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		pst, err := meta.client.Status(ctx, m.Addr)
		cancel()
		if err != nil {
			continue
		}
		for _, gs := range pst.Groups {
			if gs.Group == g && gs.State == "Leader" {
				return gs, true
			}
		}
	}
	return GroupSummary{}, false
}

// planMove chooses the next move, if any, in this order: a member that
// is gone (removed from the cluster, or out of reach past ReplaceAfter)
// is replaced by the live node holding the fewest replicas (or, removed
// and with no node to take its place, only removed); a group with fewer
// than replicasPerGroup members gains one; and a replica moves from the
// node holding the most to the one holding the fewest while they differ
// by more than one.
func planMove(recs map[uint64]placement, live []uint64, voters map[uint64]bool) (placement, bool) {
	isLive := map[uint64]bool{}
	count := map[uint64]int{}
	for _, id := range live {
		isLive[id] = true
		count[id] = 0
	}
	for _, p := range recs {
		for _, m := range p.Members {
			if isLive[m] {
				count[m]++
			}
		}
	}
	fewest := func(exclude []uint64) uint64 {
		var best uint64
		for _, id := range slices.Sorted(maps.Keys(count)) {
			if !slices.Contains(exclude, id) && (best == 0 || count[id] < count[best]) {
				best = id
			}
		}
		return best
	}
	gs := slices.Sorted(maps.Keys(recs))
	for _, g := range gs {
		p := recs[g]
		for _, m := range p.Members {
			if isLive[m] {
				continue
			}
			if d := fewest(p.Members); d != 0 {
				p.Add, p.Remove = d, m
				return p, true
			}
			if !voters[m] {
				p.Remove = m
				return p, true
			}
		}
	}
	want := min(replicasPerGroup, len(live))
	for _, g := range gs {
		p := recs[g]
		if len(p.Members) < want {
			if d := fewest(p.Members); d != 0 {
				p.Add = d
				return p, true
			}
		}
	}
	if len(live) == 0 {
		return placement{}, false
	}
	most, least := live[0], live[0]
	for _, id := range slices.Sorted(maps.Keys(count)) {
		if count[id] >= count[most] {
			most = id
		}
		if count[id] < count[least] {
			least = id
		}
	}
	if count[most]-count[least] <= 1 {
		return placement{}, false
	}
	var pick *placement
	for _, g := range gs {
		p := recs[g]
		if !slices.Contains(p.Members, most) || slices.Contains(p.Members, least) {
			continue
		}
		if pick == nil || (pick.Leader == most && p.Leader != most) {
			pick = &p
		}
	}
	if pick == nil {
		return placement{}, false
	}
	pick.Add, pick.Remove = least, most
	return *pick, true
}

// assignLeaders gives each group a preferred leader among its live
// members (the one being removed left out), spreading the groups evenly:
// a group keeps its leader while that one leads no more than its share
// (the groups over the nodes that hold any, rounded up), and the others
// go to the member leading the fewest.
func assignLeaders(recs map[uint64]placement, live []uint64) {
	isLive := map[uint64]bool{}
	for _, id := range live {
		isLive[id] = true
	}
	holding := map[uint64]bool{}
	cands := map[uint64][]uint64{}
	for g, p := range recs {
		for _, m := range p.Members {
			if isLive[m] && m != p.Remove {
				cands[g] = append(cands[g], m)
				holding[m] = true
			}
		}
		slices.Sort(cands[g])
	}
	if len(holding) == 0 {
		return
	}
	share := (len(recs) + len(holding) - 1) / len(holding)
	leads := map[uint64]int{}
	var todo []uint64
	for _, g := range slices.Sorted(maps.Keys(recs)) {
		if l := recs[g].Leader; slices.Contains(cands[g], l) && leads[l] < share {
			leads[l]++
			continue
		}
		todo = append(todo, g)
	}
	for _, g := range todo {
		var best uint64
		for _, c := range cands[g] {
			if best == 0 || leads[c] < leads[best] {
				best = c
			}
		}
		p := recs[g]
		if best != 0 {
			p.Leader = best
			leads[best]++
		}
		recs[g] = p
	}
	// Then a group goes from its leader to a member leading two fewer,
	// while there is one: each such step lowers the sum of the squared
	// counts, so it ends.
	for moved := true; moved; {
		moved = false
		for _, g := range slices.Sorted(maps.Keys(recs)) {
			p := recs[g]
			for _, c := range cands[g] {
				if p.Leader != 0 && leads[c]+1 < leads[p.Leader] {
					leads[p.Leader]--
					leads[c]++
					p.Leader, moved = c, true
					recs[g] = p
					break
				}
			}
		}
	}
}

func placementEqual(a, b placement) bool {
	return a.Group == b.Group && slices.Equal(a.Members, b.Members) && a.Leader == b.Leader && a.Add == b.Add && a.Remove == b.Remove
}

// preferredLeaders are the groups' preferred leaders as the records say
// (balance.go).
func (h *host) preferredLeaders() map[uint64]uint64 {
	out := map[uint64]uint64{}
	meta := h.node(0)
	if meta == nil {
		return out
	}
	recs, err := meta.state.placements()
	if err != nil {
		return out
	}
	for g, p := range recs {
		out[g] = p.Leader
	}
	return out
}

// groupsAtStart are the data groups this node opens when it starts: those
// its replica of the meta group places on it, those the founding members'
// spread does while no record says otherwise, and those it finds a
// directory of (a move's leftover is dropped once the records say so).
// Only at the node's first start does it bootstrap a group (from the
// founders): later, a replica of the meta group that has not flushed its
// records yet must not make it found again a group it has left, whose
// directory it deleted.
func (h *host) groupsAtStart(meta *Node) ([]Config, []uint64, error) {
	recs, err := meta.state.placements()
	if err != nil {
		return nil, nil, err
	}
	addrs := maps.Clone(meta.loop.peers) // the loop does not run yet
	if book, err := meta.state.peerBook(); err == nil {
		for id, a := range book {
			if addrs[id] == "" {
				addrs[id] = a
			}
		}
	}
	var cfgs []Config
	var gs []uint64
	for g := uint64(1); g <= uint64(h.record.Groups); g++ {
		p, placed := recs[g]
		holders := groupMembers(h.record.Members, g)
		if placed {
			holders = p.holders()
		}
		_, statErr := os.Stat(groupDir(h.cfg.Dir, g))
		if !slices.Contains(holders, h.id) && statErr != nil {
			continue
		}
		join := placed || h.cfg.Join || !slices.Contains(holders, h.id) || !h.firstStart
		cfgs = append(cfgs, h.dataConfig(g, peersOf(holders, addrs), join))
		gs = append(gs, g)
	}
	return cfgs, gs, nil
}

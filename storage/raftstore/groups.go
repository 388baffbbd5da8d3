package raftstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/omnibusmq/omnibus/storage"
)

// Raft groups.
//
// A node runs several Raft groups (DESIGN.md, "Several Raft groups"): the
// meta group, 0, of every member (what a cluster without groups has
// always been), and data groups 1..Config.Groups, each replicated on
// three of the members (all of them when there are three or fewer). Each
// group is a [Node] of its own (its RawNode, loop, appender, applier, log
// and state database, its lease and its Sessions), under
// <Dir>/groups/<g>/ for a data group; every group of a node shares the
// node's peer transport, whose streams to a peer carry the frames of all
// the groups they have in common (stream.go).
//
// Which members first hold a data group is decided when the cluster is
// made, from the founding members alone, so that every member decides the
// same: group g goes to the three members that follow the (g-1)-th in id
// order (groupMembers). The count is fixed then too and kept in
// <Dir>/groups.json, which later starts read. From then on the meta
// group's placement records say where each group is, and replicas move
// as nodes join and leave (placement.go, replicas.go).

// groupsFile records the data groups of a node's cluster.
const groupsFile = "groups.json"

// replicasPerGroup is how many members hold each data group.
const replicasPerGroup = 3

// groupsRecord is groupsFile's content.
type groupsRecord struct {
	// Groups is the number of data groups of the cluster.
	Groups int `json:"groups"`
	// Members are the founding members, in id order: groupMembers
	// spreads the groups over them.
	Members []uint64 `json:"members"`
}

// groupMembers returns the founding members that hold data group g (g ≥
// 1): replicasPerGroup of them, from the (g-1)-th on, in id order, so
// that consecutive groups start on consecutive members.
func groupMembers(founders []uint64, g uint64) []uint64 {
	ids := slices.Clone(founders)
	slices.Sort(ids)
	if len(ids) <= replicasPerGroup {
		return ids
	}
	out := make([]uint64, 0, replicasPerGroup)
	for i := range replicasPerGroup {
		out = append(out, ids[(int(g-1)+i)%len(ids)])
	}
	slices.Sort(out)
	return out
}

// groupDir is where data group g of the node at dir lives.
func groupDir(dir string, g uint64) string {
	return filepath.Join(dir, "groups", strconv.FormatUint(g, 10))
}

// loadGroups reads the node's groups record, or makes it for a new
// cluster of groups data groups over peers. A node that joins an existing
// cluster (join) records the count alone (it founds nothing), and runs
// the groups the meta group's placement records give it once it is
// added; given no count, it learns it from those records.
func loadGroups(dir string, groups int, peers map[uint64]string, join bool) (groupsRecord, error) {
	path := filepath.Join(dir, groupsFile)
	b, err := os.ReadFile(path)
	if err == nil {
		var rec groupsRecord
		if err := json.Unmarshal(b, &rec); err != nil {
			return rec, fmt.Errorf("raftstore: %w: %s: %v", storage.ErrCorrupt, path, err)
		}
		return rec, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return groupsRecord{}, fmt.Errorf("raftstore: %w: %v", storage.ErrUnavailable, err)
	}
	if groups == 0 {
		return groupsRecord{}, nil
	}
	rec := groupsRecord{Groups: groups}
	if join {
		// Not a founder: the meta group's placement records say which
		// groups it holds, once it is added (replicas.go).
		return rec, writeGroupsRecord(dir, rec)
	}
	for id := range peers {
		rec.Members = append(rec.Members, id)
	}
	slices.Sort(rec.Members)
	return rec, writeGroupsRecord(dir, rec)
}

// writeGroupsRecord replaces the node's groups.json.
func writeGroupsRecord(dir string, rec groupsRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := writeFileSync(filepath.Join(dir, groupsFile), b); err != nil {
		return fmt.Errorf("raftstore: %w: %v", storage.ErrUnavailable, err)
	}
	return nil
}

// writeFileSync writes path atomically (a temporary file renamed) and
// syncs it and its directory.
func writeFileSync(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// host is what the groups of one node share: the transport, which hands
// each group its frames and snapshots.
type host struct {
	id  uint64
	tr  transport
	cfg Config // the node's, for the groups it opens at run time

	mu     sync.Mutex // guards the fields below
	nodes  map[uint64]*Node
	record groupsRecord
	// firstStart: groupsFile was made by this start (the founders'
	// groups may be bootstrapped).
	firstStart bool
	// changed is closed (and replaced) when a group is opened or closed
	// at run time (replicas.go).
	changed chan struct{}

	mover moverState // the placement loop's (replicas.go)

	// quit ends the balance and placement loops (loops) when the node
	// closes.
	quit     chan struct{}
	quitOnce sync.Once
	loops    sync.WaitGroup

	// groupLogs is the log the data groups share (sharedlog.go), opened
	// with the first; logMu guards it.
	logMu     sync.Mutex
	groupLogs *logStore
}

// node returns the node's member of group g, nil if it runs none.
func (h *host) node(g uint64) *Node {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.nodes[g]
}

// all returns every group's member, meta group first.
func (h *host) all() []*Node {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*Node, 0, len(h.nodes))
	for _, n := range h.nodes {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].group < out[j].group })
	return out
}

func (h *host) receive(f *frame) bool {
	n := h.node(f.group)
	if n == nil {
		return true // not a group of this node's (yet): raft re-sends
	}
	return n.receive(f)
}

func (h *host) receiveSnapshot(g uint64, m pb.Message, dir string) error {
	n := h.node(g)
	if n == nil {
		return fmt.Errorf("raftstore: this node runs no group %d", g)
	}
	return n.receiveSnapshot(m, dir)
}

func (h *host) newScratch(g uint64, kind string) (string, error) {
	n := h.node(g)
	if n == nil {
		return "", fmt.Errorf("raftstore: this node runs no group %d", g)
	}
	return n.newScratch(kind)
}

func (h *host) stamp(f *frame) {
	if n := h.node(f.group); n != nil {
		n.stamp(f)
	}
}

func (h *host) unreachable(id uint64) {
	for _, n := range h.all() {
		n.unreachable(id)
	}
}

func (h *host) gone(id uint64) {
	for _, n := range h.all() {
		n.gone(id)
	}
}

func (h *host) status(g uint64) (Status, bool) {
	n := h.node(g)
	if n == nil {
		return Status{}, false
	}
	st := n.status()
	if g == 0 {
		for _, x := range h.all() {
			if x.group != 0 {
				st.Groups = append(st.Groups, x.groupSummary())
			}
		}
	}
	return st, true
}

func (h *host) following(g uint64) uint64 {
	if n := h.node(g); n != nil {
		return n.following()
	}
	return 0
}

func (h *host) changeMembers(ctx context.Context, c MemberChange) error {
	n := h.node(c.Group)
	if n == nil {
		return fmt.Errorf("raftstore: this node runs no group %d", c.Group)
	}
	return n.changeMembers(ctx, c)
}

var _ handler = (*host)(nil)

// groupLink is a group's view of the node's transport.
type groupLink struct {
	tr    transport
	group uint64
}

func (l groupLink) send(to uint64, msgs []pb.Message) { l.tr.send(l.group, to, msgs) }

func (l groupLink) sendSnapshot(m pb.Message, checkpoint func(dir string) error, done func(ok bool)) {
	l.tr.sendSnapshot(l.group, m, checkpoint, done)
}

func (l groupLink) setPeer(id uint64, addr string) { l.tr.setPeer(l.group, id, addr) }
func (l groupLink) removePeer(id uint64)           { l.tr.removePeer(l.group, id) }
func (l groupLink) addr() string                   { return l.tr.addr() }

// GroupSummary is one data group as a node sees it: its part of the
// meta group's [Status] (Status.Groups).
type GroupSummary struct {
	Group   uint64 `json:"group"`
	State   string `json:"state"`
	Term    uint64 `json:"term"`
	Leader  uint64 `json:"leader"`
	Commit  uint64 `json:"commit"`
	Applied uint64 `json:"applied"`
	Serving bool   `json:"serving"`
	// ServingSince is when (wall clock) this node's Session of the group
	// began, while it serves.
	ServingSince time.Time `json:"servingSince,omitzero"`
	Voters       []uint64  `json:"voters"`
	Learners     []uint64  `json:"learners,omitempty"`
}

// groupSummary is what Status.Groups says of this group, from what other
// goroutines can see (it does not wait for the loop).
func (n *Node) groupSummary() GroupSummary {
	s := GroupSummary{Group: n.group, Term: n.term.Load(), Leader: n.leader.Load(),
		Commit: n.commit.Load(), Applied: n.applied.Load(), Voters: n.voters(), Learners: n.learners()}
	switch {
	case s.Leader == n.id:
		s.State = "Leader"
	case s.Leader != 0:
		s.State = "Follower"
	default:
		s.State = "NoLeader"
	}
	n.mu.Lock()
	if n.sess != nil {
		s.Serving, s.ServingSince = true, n.sess.started
	}
	n.mu.Unlock()
	return s
}

// Group is the Raft group this member belongs to (0: the meta group).
func (n *Node) Group() uint64 { return n.group }

// Groups returns this node's members of every group it runs, the meta
// group first, then the data groups in order.
func (n *Node) Groups() []*Node { return n.host.all() }

// GroupNode returns this node's member of group g, nil if it runs none.
func (n *Node) GroupNode(g uint64) *Node { return n.host.node(g) }

// DataGroups is the number of data groups of the cluster (0: the meta
// group holds everything).
func (n *Node) DataGroups() int {
	n.host.mu.Lock()
	defer n.host.mu.Unlock()
	return n.host.record.Groups
}

// publishVoters makes the group's voters and learners known to other
// goroutines.
func (n *Node) publishVoters(cs pb.ConfState) {
	v := slices.Clone(cs.Voters)
	slices.Sort(v)
	n.votersPub.Store(&v)
	l := slices.Clone(cs.Learners)
	slices.Sort(l)
	n.learnersPub.Store(&l)
}

// learners returns the group's learners as the loop last saw them.
func (n *Node) learners() []uint64 {
	if p := n.learnersPub.Load(); p != nil {
		return *p
	}
	return nil
}

// voters returns the group's voters as the loop last saw them.
func (n *Node) voters() []uint64 {
	if p := n.votersPub.Load(); p != nil {
		return *p
	}
	return nil
}

// ReadReplica reads key from this member's copy of the group's state:
// what it has applied, which may lag behind what the leader committed.
// Keys are a Session's (the broker's keys).
func (n *Node) ReadReplica(key []byte) ([]byte, error) { return n.state.get(key) }

// ScanReplica scans this member's copy of the group's state from prefix,
// as ReadReplica reads it.
func (n *Node) ScanReplica(prefix []byte, fn func(key, value []byte) (bool, error)) error {
	return n.state.scan(prefix, nil, fn)
}

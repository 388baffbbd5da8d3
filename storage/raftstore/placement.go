package raftstore

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/raft/v3"

	"github.com/omnibusmq/omnibus/storage"
)

// Placement of the data groups (DESIGN.md, "Placement of the groups").
//
// The meta group holds, for each data group g, a placement record under
// prefixPlace: the members holding g, its preferred leader, and the one
// replica move under way, if any (a member being added, and the one it
// replaces). The meta leader writes the records (replicas.go): at first,
// one per group from the founding members (what groups.json says), then
// each move as it plans it and once it is done. Every node reads its own
// replica of the meta group to know which groups to run; the leader of a
// data group reads it to know which membership change to make next.
//
// A record travels as an entry of its own kind in the meta group's log
// (placementEntry), not as a Session's batch: the meta group's Session is
// the placement service's (the app's), and a record is the node's own
// state, beside the applied index and the peer book, out of the broker's
// sight.

var prefixPlace = []byte("m/place/")

// placementEntry is the first byte of a meta group entry that carries a
// placement record (a Session's entries start with entryVersion).
const placementEntry = 2

// placement is data group Group's placement record.
type placement struct {
	Group uint64 `json:"group"`
	// Members hold the group's replicas, in id order: its voters once no
	// move is under way.
	Members []uint64 `json:"members"`
	// Leader is the member that should lead the group (balance.go).
	Leader uint64 `json:"leader,omitempty"`
	// Add and Remove are the move under way: Add joins as a learner,
	// catches up and is promoted, then Remove leaves. Either may be 0
	// (a member removed from the cluster with no node to replace it).
	Add    uint64 `json:"add,omitempty"`
	Remove uint64 `json:"remove,omitempty"`
}

// moving reports whether a move of the group is under way.
func (p placement) moving() bool { return p.Add != 0 || p.Remove != 0 }

// holders are the nodes that must run the group now: its members and the
// one being added.
func (p placement) holders() []uint64 {
	out := slices.Clone(p.Members)
	if p.Add != 0 && !slices.Contains(out, p.Add) {
		out = append(out, p.Add)
	}
	slices.Sort(out)
	return out
}

// target is the group's members once the move under way is done.
func (p placement) target() []uint64 {
	return slices.DeleteFunc(p.holders(), func(id uint64) bool { return id == p.Remove })
}

func placeKey(g uint64) []byte {
	return binary.BigEndian.AppendUint64(slices.Clone(prefixPlace), g)
}

// encodePlacement is p as a meta group entry.
func encodePlacement(p placement) ([]byte, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	return append([]byte{placementEntry}, b...), nil
}

// decodePlacement reads an entry encodePlacement wrote.
func decodePlacement(data []byte) (placement, error) {
	var p placement
	if len(data) == 0 || data[0] != placementEntry {
		return p, errBadEntry
	}
	if err := json.Unmarshal(data[1:], &p); err != nil || p.Group == 0 {
		return p, fmt.Errorf("%w: placement record: %v", errBadEntry, err)
	}
	return p, nil
}

// placements reads every placement record of this (meta group) member's
// replica, by group.
func (s *stateStore) placements() (map[uint64]placement, error) {
	out := map[uint64]placement{}
	err := s.db.Load().Scan(prefixPlace, nil, func(k, v []byte) (bool, error) {
		var p placement
		if err := json.Unmarshal(v, &p); err != nil {
			return false, fmt.Errorf("raftstore: %w: placement record %x: %v", storage.ErrCorrupt, k, err)
		}
		out[p.Group] = p
		return true, nil
	})
	return out, swapped(err)
}

// errNotMetaLeader: placements are written by the meta group's leader.
var errNotMetaLeader = errors.New("raftstore: only the meta group's leader writes placements")

// proposePlacements proposes records on the meta group (n), if it leads.
// Whether they were committed shows in the replica (placements): the
// callers look again at their next turn, and write again if not.
func (n *Node) proposePlacements(ps []placement) error {
	var ents [][]byte
	for _, p := range ps {
		e, err := encodePlacement(p)
		if err != nil {
			return err
		}
		ents = append(ents, e)
	}
	errc := make(chan error, 1)
	n.runOnLoop(func() {
		if n.loop.rn.BasicStatus().RaftState != raft.StateLeader {
			errc <- errNotMetaLeader
			return
		}
		for _, e := range ents {
			if err := n.loop.rn.Propose(e); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	})
	select {
	case err := <-errc:
		return err
	case <-n.stopc:
		return storage.ErrClosed
	}
}

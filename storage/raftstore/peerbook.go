package raftstore

import (
	"encoding/binary"
	"fmt"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/omnibusmq/omnibus/storage"
)

// The peer book: every member's peer address, kept in the state database
// under prefixPeer as the conf changes that carry them are applied (in
// the same batch as the applied index). A node restarted with a --peers
// that predates members added at run time still finds them there, and a
// node that caught up from a snapshot receives the book with the
// checkpoint.

var prefixPeer = []byte("m/peer/")

func peerKey(id uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), prefixPeer...), id)
}

// recordPeers adds to b what cc changes in the peer book.
func recordPeers(b *storage.Batch, cc pb.ConfChangeI) {
	addr := peerAddrOf(cc)
	for _, c := range cc.AsV2().Changes {
		switch c.Type {
		case pb.ConfChangeAddNode, pb.ConfChangeAddLearnerNode:
			if addr != "" {
				b.Set(peerKey(c.NodeID), []byte(addr))
			}
		case pb.ConfChangeRemoveNode:
			b.Delete(peerKey(c.NodeID))
		}
	}
}

// peerBook reads the peer book.
func (s *stateStore) peerBook() (map[uint64]string, error) {
	book := map[uint64]string{}
	err := s.db.Load().Scan(prefixPeer, nil, func(k, v []byte) (bool, error) {
		if len(k) != len(prefixPeer)+8 {
			return false, fmt.Errorf("raftstore: %w: peer book key %x", storage.ErrCorrupt, k)
		}
		book[binary.BigEndian.Uint64(k[len(prefixPeer):])] = string(v)
		return true, nil
	})
	return book, swapped(err)
}

// learnPeers gives the loop the addresses the peer book knows of members
// --peers does not name; --peers wins where both name one (an operator
// who moved a node says so there). It returns the ids it learned.
func (n *Node) learnPeers(book map[uint64]string, members pb.ConfState) []uint64 {
	var learned []uint64
	for _, ids := range [][]uint64{members.Voters, members.Learners, members.VotersOutgoing, members.LearnersNext} {
		for _, id := range ids {
			if addr, ok := book[id]; ok && id != n.id && n.loop.peers[id] == "" {
				n.loop.peers[id] = addr
				learned = append(learned, id)
			}
		}
	}
	return learned
}

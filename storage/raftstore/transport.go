package raftstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	pb "go.etcd.io/raft/v3/raftpb"
)

// transport carries a node's frames to its peers and delivers theirs, for
// every Raft group the node is a member of (groups.go): one set of
// streams per peer carries them all. Sends never block the loop: a full
// queue drops messages, which raft tolerates (it re-sends), and the peer
// is reported unreachable.
type transport interface {
	// start begins delivering what peers send to h.
	start(h handler) error
	// send queues msgs of group (all for peer to, none a MsgSnap).
	send(group, to uint64, msgs []pb.Message)
	// sendSnapshot sends group's MsgSnap m with a checkpoint of the
	// group's state database made by checkpoint into a fresh directory,
	// in the background, then calls done with the outcome.
	sendSnapshot(group uint64, m pb.Message, checkpoint func(dir string) error, done func(ok bool))
	// setPeer adds or updates a peer's address for group; removePeer
	// drops it from group. A peer no group names any more is dropped.
	setPeer(group, id uint64, addr string)
	removePeer(group, id uint64)
	// addr is the address the transport listens on.
	addr() string
	close() error
}

// handler is the node, all its groups, as its transport sees it.
type handler interface {
	// receive delivers a frame from a peer to the group it names and
	// returns false once the node is closed. A frame of entries may block
	// (back-pressure on that peer's stream); any other frame never does:
	// it is dropped (true) when its group has too many waiting, as is a
	// frame of a group the node does not run (Node.receive).
	receive(f *frame) bool
	// receiveSnapshot delivers group's MsgSnap whose checkpoint was
	// written into dir (which the node takes over), from newScratch.
	receiveSnapshot(group uint64, m pb.Message, dir string) error
	// newScratch returns a new empty directory for a snapshot of group
	// in transit.
	newScratch(group uint64, kind string) (string, error)
	// stamp fills the lease fields of a frame about to be written to
	// peer f.to for group f.group: the send time and the echo of to's
	// latest frame.
	stamp(f *frame)
	// unreachable reports that messages to id could not be sent.
	unreachable(id uint64)
	// gone reports that nothing listens at id's address any more (the
	// connection was refused): its process is not running.
	gone(id uint64)
	// status is a group's status (served to `omnibus cluster status`);
	// ok is false for a group the node does not run.
	status(group uint64) (st Status, ok bool)
	// following is the leader of group the node knows of (0: none).
	following(group uint64) uint64
	// changeMembers adds or removes a member of c.Group (`omnibus
	// cluster add`, `remove`).
	changeMembers(ctx context.Context, c MemberChange) error
}

// frame is what goes over a peer stream: one group's raft messages plus
// the fields that group's lease needs (see DESIGN.md, "The lease").
type frame struct {
	group    uint64 // the Raft group (groups.go); 0 is the meta group
	from, to uint64
	// sent is the sender's monotonic clock when the frame was written.
	sent int64
	// echoTerm and echoSent repeat, to the leader this frame goes to, the
	// send time of the latest of its frames that reset the sender's
	// election timer in term echoTerm. Zero when there is none.
	echoTerm uint64
	echoSent int64
	msgs     []pb.Message
}

var errBadFrame = errors.New("raftstore: malformed frame")

// appendFrame encodes f, growing dst at most once.
func appendFrame(dst []byte, f *frame) ([]byte, error) {
	need := 7 * binary.MaxVarintLen64
	for i := range f.msgs {
		need += binary.MaxVarintLen64 + f.msgs[i].Size()
	}
	dst = slices.Grow(dst, need)
	dst = binary.AppendUvarint(dst, f.group)
	dst = binary.AppendUvarint(dst, f.from)
	dst = binary.AppendUvarint(dst, f.to)
	dst = binary.AppendVarint(dst, f.sent)
	dst = binary.AppendUvarint(dst, f.echoTerm)
	dst = binary.AppendVarint(dst, f.echoSent)
	dst = binary.AppendUvarint(dst, uint64(len(f.msgs)))
	for i := range f.msgs {
		n := f.msgs[i].Size()
		dst = binary.AppendUvarint(dst, uint64(n))
		start := len(dst)
		dst = dst[:start+n] // within the capacity grown above; MarshalTo fills it
		if _, err := f.msgs[i].MarshalTo(dst[start:]); err != nil {
			return nil, fmt.Errorf("raftstore: encode message: %w", err)
		}
	}
	return dst, nil
}

// parseFrame decodes a frame. When owned, its entries' Data point into
// data, which the caller must not change afterwards; otherwise its
// messages copy what they keep (unmarshalMessage: one copy per message
// that carries entries), so data can be reused.
func parseFrame(data []byte, owned bool) (*frame, error) {
	r := reader{b: data}
	f := &frame{group: r.uvarint()}
	f.from, f.to = r.uvarint(), r.uvarint()
	f.sent = r.varint()
	f.echoTerm = r.uvarint()
	f.echoSent = r.varint()
	n := r.uvarint()
	if r.err != nil || n > uint64(len(data)) {
		return nil, errBadFrame
	}
	f.msgs = make([]pb.Message, n)
	for i := range f.msgs {
		b := r.bytes()
		if r.err != nil {
			return nil, errBadFrame
		}
		if err := unmarshalMessage(&f.msgs[i], b, owned); err != nil {
			return nil, fmt.Errorf("%w: %v", errBadFrame, err)
		}
	}
	if len(r.b) != 0 {
		return nil, errBadFrame
	}
	return f, nil
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errBadEntry
		return 0
	}
	r.b = r.b[n:]
	return v
}

// resetsTimer reports whether a follower that steps m from its leader
// restarts its election timer (etcd raft's stepFollower).
func resetsTimer(t pb.MessageType) bool {
	return t == pb.MsgApp || t == pb.MsgHeartbeat || t == pb.MsgSnap
}

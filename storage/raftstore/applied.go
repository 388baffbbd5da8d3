package raftstore

// Applied is the index of the last entry this member applied to its copy
// of the group's state (ReadReplica reads it): a caller that keeps
// something in step with the replica looks again only when it moved.
func (n *Node) Applied() uint64 { return n.applied.Load() }

// AppliedMoved returns a channel closed the next time this member
// publishes an applied position after the call: take it, then read
// Applied, then wait on it, and no move is missed. A caller waiting on it
// takes no wake-ups while the group is idle.
func (n *Node) AppliedMoved() <-chan struct{} {
	for {
		if p := n.appliedMoved.Load(); p != nil {
			return *p
		}
		ch := make(chan struct{})
		if n.appliedMoved.CompareAndSwap(nil, &ch) {
			return ch
		}
	}
}

// publishApplied closes the channel AppliedMoved handed out, if any; the
// applied position must be stored first.
func (n *Node) publishApplied() {
	if p := n.appliedMoved.Swap(nil); p != nil {
		close(*p)
	}
}

package raftstore

// Applied is the index of the last entry this member applied to its copy
// of the group's state (ReadReplica reads it): a caller that keeps
// something in step with the replica looks again only when it moved.
func (n *Node) Applied() uint64 { return n.applied.Load() }

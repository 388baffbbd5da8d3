package core

// Partitions held elsewhere.
//
// A cluster with data groups spreads a partitioned queue or topic over
// its groups (route_spread.go): every group holding some of its
// partitions holds the entity, with all its partitions (so its sequence
// numbers and lock tokens name partitions as on one broker), and is told
// in [Entity.HeldPartitions] which of them are its own. Only those take
// messages: a message without a partition key goes to the held
// partitions in turn, and one whose key picks a partition held by
// another group is refused as server busy (the routed broker sends each
// key to its partition's group, so this happens only when a placement
// changes under a sender). Receives, peeks, counts and sessions need no
// change: the partitions held elsewhere stay empty here.

// holdsPart reports whether the broker holding d holds its partition p.
func holdsPart(d *Entity, p int) bool {
	return d.HeldPartitions == nil || p < len(d.HeldPartitions) && d.HeldPartitions[p]
}

// nextHeldPart is the held partition of e the next message without a
// key goes to.
func (e *entity) nextHeldPart(d *Entity) int {
	n := len(e.parts)
	for range n {
		if p := int(e.nextPart.Add(1) % uint32(n)); holdsPart(d, p) {
			return p
		}
	}
	return int(e.nextPart.Add(1) % uint32(n)) // none held: checkHeld refused that at create
}

// checkHeldPart refuses a message for partition p of e when another data
// group holds it: for now (server busy) when a client sent it, for good
// when it was forwarded (hops > 0: a transfer is then dead-lettered at its
// source rather than retried forever; the routed broker refuses
// forwarding to a spread entity, so this is a target that became spread
// after its source was set to forward to it).
func checkHeldPart(d *Entity, p, hops int) error {
	if holdsPart(d, p) {
		return nil
	}
	if hops > 0 {
		return errf(CodeBadRequest, "Partition %d of '%s' is served by another data group of the cluster: forwarding to a partitioned entity spread over data groups is not supported.", p, d.Path())
	}
	return errf(CodeServerBusy, "Partition %d of '%s' is served by another data group of the cluster; retry.", p, d.Path())
}

// checkHeld checks a new entity's HeldPartitions: only on a partitioned
// queue or topic, at most MaxPartitionCount, at least one held.
func checkHeld(e *Entity) error {
	if e.HeldPartitions == nil || e.Kind == KindSubscription {
		return nil
	}
	n := len(e.HeldPartitions)
	if !e.EnablePartitioning || n < 1 || n > MaxPartitionCount {
		return errf(CodeBadRequest, "%s '%s': HeldPartitions (%d) needs EnablePartitioning and 1 to %d partitions", e.Kind, e.Path(), n, MaxPartitionCount)
	}
	for _, h := range e.HeldPartitions {
		if h {
			return nil
		}
	}
	return errf(CodeBadRequest, "%s '%s': HeldPartitions holds no partition", e.Kind, e.Path())
}

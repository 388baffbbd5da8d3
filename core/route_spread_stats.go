package core

import "sync/atomic"

// SpreadReceiveStats count what the receives from spread entities
// (route_spread_recv.go) cost a routed broker, in numbers that do not
// depend on the machine's load: how many group receives (a call on
// another node for every group this node does not lead) and how many
// messages handed out and given back each delivered message took. A
// receive that wastes nothing asks each group at most once per wait and
// releases nothing, but one: a wait for fewer messages than there are
// groups has no share to ask each for, so it asks each for all of them,
// and two groups answering at once leave the later one's to release
// (ReleasedSmallCredit, part of Released).
type SpreadReceiveStats struct {
	Receives      int64 // receives from spread entities (a session's, in its group, not counted)
	GroupReceives int64 // receives asked of one group on their behalf
	Delivered     int64 // messages they returned
	Released      int64 // messages a group handed out that the receive gave back (released, no delivery counted)
	// ReleasedSmallCredit: those of Released that a wait for fewer
	// messages than groups gave back.
	ReleasedSmallCredit int64
}

// spreadCounters are a routed broker's [SpreadReceiveStats], bumped as
// the receives go.
type spreadCounters struct {
	receives, groupReceives, delivered, released atomic.Int64
	releasedSmallCredit                          atomic.Int64
}

// SpreadReceiveStats returns the broker's counts since it started.
func (b *Broker) SpreadReceiveStats() SpreadReceiveStats {
	c := &b.spread
	return SpreadReceiveStats{Receives: c.receives.Load(), GroupReceives: c.groupReceives.Load(),
		Delivered: c.delivered.Load(), Released: c.released.Load(), ReleasedSmallCredit: c.releasedSmallCredit.Load()}
}

package raftstore

import (
	"time"

	"go.uber.org/zap"
)

// Leadership balancing. Every node leads about as many data groups as
// every other, so that every node does a share of the broker's work:
// once a second each node looks at the data groups it holds and, if it
// leads at least two more of them than one of their other voters that is
// reachable and has the whole log does, hands the leadership of one to
// that voter (raft's leadership transfer: the target is brought up to
// date and campaigns at once, without waiting out an election timeout).
// One transfer per node per round, so the counts settle without
// overshooting. A node that joins, or comes back, leads nothing: the
// others hand it groups until the counts are even again; one that leaves
// has its groups elected elsewhere by raft alone. With three nodes, each
// holding every group, the counts are exact; with more, each node counts
// over the groups it holds, which spreads the leadership within each
// group's three replicas.

// balanceEvery is how often a node looks at the leadership of its groups.
const balanceEvery = time.Second

// balance runs until the node closes.
func (h *host) balance(stop <-chan struct{}, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		h.balanceOnce()
	}
}

// balanceOnce hands over at most one group's leadership, if the counts
// call for it.
func (h *host) balanceOnce() {
	var data []*Node
	for _, n := range h.all() {
		if n.group != 0 {
			data = append(data, n)
		}
	}
	if len(data) == 0 {
		return
	}
	led := map[uint64]int{}
	for _, n := range data {
		if l := n.Leader(); l != 0 {
			led[l]++
		}
	}
	for _, n := range data {
		if n.Leader() != h.id {
			continue
		}
		st := n.Status()
		if st.State != "StateLeader" {
			continue
		}
		var target uint64
		for _, m := range st.Members {
			if m.ID == h.id || !m.Voter || !m.Reachable || m.Match < st.LastIndex {
				continue
			}
			if led[h.id]-led[m.ID] >= 2 && (target == 0 || led[m.ID] < led[target]) {
				target = m.ID
			}
		}
		if target == 0 {
			continue
		}
		n.log.Info("handing this group's leadership over to even out the leaders",
			zap.Uint64("to", target), zap.Int("led here", led[h.id]), zap.Int("led there", led[target]))
		n.runOnLoop(func() { n.loop.rn.TransferLeader(target) })
		return
	}
}

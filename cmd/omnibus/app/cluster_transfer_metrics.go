package app

import (
	"sync"

	"github.com/omnibusmq/omnibus/cmd/omnibus/metrics"
)

// transferCounts counts, by source and target data group, the transfers
// this node's pumps handed over (cluster_transfer.go), for the metrics
// (omnibus_transfers_*_total): counted per round, not per message path.
type transferCounts struct {
	mu                    sync.Mutex // guards the maps
	sent, failed, refused map[metrics.GroupPair]uint64
}

// add adds n to what's count of transfers from group g to group tg.
func (c *transferCounts) add(what *map[metrics.GroupPair]uint64, g, tg uint64, n int) {
	if n <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if *what == nil {
		*what = map[metrics.GroupPair]uint64{}
	}
	(*what)[metrics.GroupPair{Group: g, To: tg}] += uint64(n)
}

// transferMetrics is what the node's metrics report of transfers: the
// outbox of each group it leads now (every namespace's broker in it) and
// the counts.
func (r *routed) transferMetrics() metrics.Transfers {
	out := metrics.Transfers{Outbox: map[uint64]int{}}
	r.mu.Lock()
	local := make(map[uint64]*localGroup, len(r.local))
	for g, lg := range r.local {
		local[g] = lg
	}
	r.mu.Unlock()
	for g, lg := range local {
		n := lg.b.OutboxDepth()
		lg.spaces.Lock()
		for _, b := range lg.spaces.by {
			n += b.OutboxDepth()
		}
		lg.spaces.Unlock()
		out.Outbox[g] = n
	}
	c := &r.xferCounts
	c.mu.Lock()
	defer c.mu.Unlock()
	copyOf := func(m map[metrics.GroupPair]uint64) map[metrics.GroupPair]uint64 {
		cp := make(map[metrics.GroupPair]uint64, len(m))
		for k, v := range m {
			cp[k] = v
		}
		return cp
	}
	out.Sent, out.Failed, out.Refused = copyOf(c.sent), copyOf(c.failed), copyOf(c.refused)
	return out
}

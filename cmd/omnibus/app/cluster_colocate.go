package app

import (
	"context"
	"sort"
	"strings"

	"github.com/omnibusmq/omnibus/core"
)

// placeForwardingTogether places, on the meta leader, each set of the
// config file's queues and topics joined by forwarding (a queue's
// ForwardTo or ForwardDeadLetteredMessagesTo, a subscription's, which
// joins its topic) in one data group: the group one of them has already
// (the first in name order), else the one with the fewest. A data group
// forwards only within itself, and applyConfig creates every entity
// before it sets forwarding, so the placement made at each create could
// not see where its targets are. Sets whose members were placed apart
// before (an earlier file) stay apart: setting their forwarding is then
// refused, naming both groups.
func (r *routed) placeForwardingTogether(ctx context.Context, entities []core.Entity) error {
	parent := map[string]string{}
	var find func(string) string
	find = func(n string) string {
		p, ok := parent[n]
		if !ok || p == n {
			parent[n] = n
			return n
		}
		root := find(p)
		parent[n] = root
		return root
	}
	for _, e := range entities {
		home := e.Name
		if e.Kind == core.KindSubscription {
			home = e.Topic
		}
		for _, target := range []string{e.ForwardTo, e.ForwardDeadLetteredMessagesTo} {
			if name := core.ParseAddress(target).Entity; name != "" {
				parent[find(strings.ToLower(name))] = find(strings.ToLower(home))
			}
		}
	}
	sets := map[string][]string{}
	for n := range parent {
		root := find(n)
		sets[root] = append(sets[root], n)
	}
	roots := make([]string, 0, len(sets))
	for root, names := range sets {
		if len(names) > 1 {
			sort.Strings(names)
			roots = append(roots, root)
		}
	}
	sort.Strings(roots)
	for _, root := range roots {
		names := sets[root]
		var g uint64
		for _, n := range names {
			pg, err := r.place(ctx, n, 0, false)
			if err != nil {
				return err
			}
			if pg != 0 {
				g = pg
				break
			}
		}
		for _, n := range names {
			pg, err := r.place(ctx, n, g, true)
			if err != nil {
				return err
			}
			if g == 0 {
				g = pg
			}
		}
	}
	return nil
}

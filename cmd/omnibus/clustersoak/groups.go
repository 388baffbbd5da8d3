package clustersoak

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// A cluster with data groups (Config.Groups, omnibus --groups). Every node
// leads a data group (its preferred one), and one of them the meta group
// as well, so there is no one leader to depose: the failovers depose the
// meta leader and the other nodes in turn, each time whatever it leads,
// and every fault kind hits both (faults.go). The queue lives in one data
// group; its clients reach the cluster through the balancer, so their
// links are served by whichever node leads that group, from whichever
// node they reached. A failover's time runs from the fault taking effect
// to the first send acknowledged at or after the moment the last of the
// deposed node's data groups was served again (by its new leader's
// report); when the deposed node led only groups the queue is not in,
// sends go on and the first comes at once.

// groupView is who leads what, as the reachable nodes report it.
type groupView struct {
	meta    int              // the meta group's leader (0: none known)
	term    uint64           // the meta group's term
	leaders map[uint64]int   // data group → the node serving it
	since   map[uint64]int64 // data group → when (unix nanos) that node began serving it
}

// viewGroups asks every reachable node.
func viewGroups(nodes []*node) groupView {
	v := groupView{leaders: map[uint64]int{}, since: map[uint64]int64{}}
	for _, a := range statuses(nodes) {
		if a.st.Serving && a.st.Term >= v.term {
			v.meta, v.term = a.n.id, a.st.Term
		}
		for _, g := range a.st.Groups {
			if g.Serving && g.Leader == uint64(a.n.id) {
				v.leaders[g.Group] = a.n.id
				v.since[g.Group] = g.ServingSince.UnixNano()
			}
		}
	}
	return v
}

// waitAllServed waits until the meta group and every data group are
// served by a reachable node.
func waitAllServed(ctx context.Context, nodes []*node, groups int, timeout time.Duration) (groupView, error) {
	deadline := time.Now().Add(timeout)
	for {
		v := viewGroups(nodes)
		if v.meta != 0 && len(v.leaders) == groups {
			return v, nil
		}
		if time.Now().After(deadline) {
			return v, fmt.Errorf("not every group is served within %s (meta leader %d, data groups served %v)", timeout, v.meta, v.leaders)
		}
		if ctx.Err() != nil {
			return v, ctx.Err()
		}
		pause(ctx, 20*time.Millisecond)
	}
}

// pickVictim is a failover's victim: the meta leader when meta, else the
// nth (round) of the nodes that lead a data group but not the meta group
// (a node just brought back may lead nothing yet; it is taken only when
// no other is left), so that every node is hit.
func pickVictim(nodes []*node, v groupView, meta bool, nth int) *node {
	var leading, others []*node
	for _, n := range nodes {
		if n.id == v.meta {
			if meta {
				return n
			}
			continue
		}
		others = append(others, n)
		for _, id := range v.leaders {
			if id == n.id {
				leading = append(leading, n)
				break
			}
		}
	}
	if len(leading) > 0 {
		return leading[nth%len(leading)]
	}
	return others[nth%len(others)]
}

// groupsFailover deposes a node (faults.go's schedule says which fault,
// and whether the meta leader or another) and measures how long
// until its data groups are served elsewhere and the queue takes a send.
func groupsFailover(ctx context.Context, c *Config, k int, nodes []*node, nw *network, lb *balancer, ld *load) (Failover, error) {
	before, err := waitAllServed(ctx, nodes, c.Groups, c.ReadyTimeout)
	if err != nil {
		return Failover{}, fmt.Errorf("failover %d: %w", k, err)
	}
	kind, meta := schedule(faultKinds(c.Mode, nw.netns), k)
	nth := 0 // failovers before k whose victim was not the meta leader
	for i := 1; i < k; i++ {
		if _, m := schedule(faultKinds(c.Mode, nw.netns), i); !m {
			nth++
		}
	}
	victim := pickVictim(nodes, before, meta, nth)
	var led []uint64
	for g, id := range before.leaders {
		if id == victim.id {
			led = append(led, g)
		}
	}
	slices.Sort(led)
	var roles []string
	if before.meta == victim.id {
		roles = append(roles, "the meta leader")
	}
	for _, g := range led {
		roles = append(roles, fmt.Sprint("group ", g, "'s leader"))
	}
	if len(roles) == 0 {
		roles = append(roles, "leading nothing")
	}
	f := Failover{Old: victim.id, OldTerm: before.term, How: kind, Kind: kind, Meta: before.meta == victim.id}
	f.How += " (" + strings.Join(roles, ", ") + ")"
	defer ld.faultBegins()()
	f.completions, err = ld.completionsAt(func() error {
		lb.setUp(victim.id-1, false)
		return fault(kind, victim, nw)
	})
	effect := time.Now()
	ld.trace.line("failover %d: node %d %s", k, victim.id, f.How)
	ld.acked.start()
	defer ld.acked.stop()
	if err != nil {
		return f, fmt.Errorf("failover %d: %w", k, err)
	}
	// Every group the victim led is served again, by another node.
	deadline := time.Now().Add(c.ReadyTimeout)
	since := effect
	for {
		v := viewGroups(nodes)
		moved := v.meta != 0 && v.meta != victim.id
		for _, g := range led {
			if id := v.leaders[g]; id == 0 || id == victim.id {
				moved = false
			}
		}
		if moved {
			f.New, f.NewTerm = v.meta, v.term
			for _, g := range led {
				f.New = v.leaders[g]
				if t := time.Unix(0, v.since[g]); t.After(since) {
					since = t
				}
			}
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return f, fmt.Errorf("failover %d: node %d's groups %v were not served again within %s", k, victim.id, led, c.ReadyTimeout)
		}
		pause(ctx, 10*time.Millisecond)
	}
	f.Elected = since.Sub(effect)
	for {
		d, ok := ld.acked.firstAck(effect, since)
		if ok {
			f.FirstAck = d
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return f, fmt.Errorf("failover %d: no send acknowledged within %s of node %d's fault", k, c.ReadyTimeout, victim.id)
		}
		pause(ctx, 2*time.Millisecond)
	}
	if err = recoverFrom(kind, victim, nw); err != nil {
		return f, fmt.Errorf("failover %d: bringing node %d back: %w", k, victim.id, err)
	}
	ld.trace.line("failover %d: node %d back", k, victim.id)
	lb.setUp(victim.id-1, true)
	return f, nil
}

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
// nodes in turn, each time whatever it leads. The queue lives in one data
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

// groupsFailover deposes node ((k-1) mod n) + 1 and measures how long
// until its data groups are served elsewhere and the queue takes a send.
func groupsFailover(ctx context.Context, c *Config, k int, nodes []*node, nw *network, lb *balancer, ld *load) (Failover, error) {
	before, err := waitAllServed(ctx, nodes, c.Groups, c.ReadyTimeout)
	if err != nil {
		return Failover{}, fmt.Errorf("failover %d: %w", k, err)
	}
	victim := nodes[(k-1)%len(nodes)]
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
	f := Failover{Old: victim.id, OldTerm: before.term, How: "killed"}
	cut := c.Mode == "mixed" && k%2 == 0
	if cut {
		f.How = "cut off"
		if !nw.netns {
			f.How = "froze (SIGSTOP)"
		}
	}
	f.How += " (" + strings.Join(roles, ", ") + ")"
	ld.failing.Add(1)
	defer ld.failing.Add(-1)
	f.completions, err = ld.completionsAt(func() error {
		lb.setUp(victim.id-1, false)
		switch {
		case !cut:
			return victim.kill()
		case nw.netns:
			victim.cutOff = true
			return nw.cut(victim.id, true)
		default:
			return victim.freeze(true)
		}
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
	switch {
	case !cut:
		err = victim.start()
	case nw.netns:
		victim.cutOff = false
		err = nw.cut(victim.id, false)
	default:
		err = victim.freeze(false)
	}
	if err != nil {
		return f, fmt.Errorf("failover %d: bringing node %d back: %w", k, victim.id, err)
	}
	ld.trace.line("failover %d: node %d back", k, victim.id)
	lb.setUp(victim.id-1, true)
	return f, nil
}

package core_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// spreadRouter is groupRouter as a core.SpreadRouter: a partitioned
// entity's partitions go to groups 1 and 2 in turn, and group g's backend
// is what backend (when set) makes of it.
type spreadRouter struct {
	groupRouter
	spreads map[string]*core.Spread // under testRouter.mu
	backend func(g uint64, be core.Backend) core.Backend
}

func (r *spreadRouter) Spread(_ context.Context, name string) (*core.Spread, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.spreads[name], nil
}

func (r *spreadRouter) PlaceSpread(ctx context.Context, name string, n int, dupKeys bool) (*core.Spread, error) {
	if _, err := r.PlaceIn(ctx, name, 1); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	sp := &core.Spread{Groups: make([]uint64, n), DupKeys: dupKeys}
	for p := range sp.Groups {
		sp.Groups[p] = uint64(p%2) + 1
	}
	r.spreads[name] = sp
	return sp, nil
}

func (r *spreadRouter) GroupBackend(g uint64) (core.Backend, error) {
	be := core.Backend(r.backends[g-1])
	if r.backend != nil {
		be = r.backend(g, be)
	}
	return be, nil
}

// meetingBackend is a group's backend whose CompleteMany waits until
// every group's has begun (or gives up after a while, failing).
type meetingBackend struct {
	core.Backend
	meet *meeting
}

// meeting is a barrier for n parties.
type meeting struct {
	mu      sync.Mutex
	arrived int
	n       int
	all     chan struct{}
}

func (b meetingBackend) CompleteMany(path string, toks []core.LockToken, durable bool) []error {
	m := b.meet
	m.mu.Lock()
	if m.arrived++; m.arrived == m.n {
		close(m.all)
	}
	m.mu.Unlock()
	select {
	case <-m.all:
		return b.Backend.CompleteMany(path, toks, durable)
	case <-time.After(10 * time.Second):
		errs := make([]error, len(toks))
		for i := range errs {
			errs[i] = errors.New("the other group's completions never began while this group's waited")
		}
		return errs
	}
}

// TestSpreadCompleteManyAsksTheGroupsAtOnce: completing messages of a
// partitioned entity spread over two groups asks both groups at the same
// time, not one after the other (each is a round trip to another node
// with a commit in it). Each group's CompleteMany here waits until the
// other's has begun: one after the other, the first never returns.
func TestSpreadCompleteManyAsksTheGroupsAtOnce(t *testing.T) {
	tr := &testRouter{placed: map[string]int{}}
	for range 2 {
		tr.backends = append(tr.backends, coretest.New(t).Broker)
	}
	sr := &spreadRouter{groupRouter: groupRouter{tr}, spreads: map[string]*core.Spread{}}
	b, err := core.New(core.Config{Router: sr, PartitionCount: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ctx := t.Context()
	if _, err := b.CreateEntity(ctx, core.Entity{Kind: core.KindQueue, Name: "p", EnablePartitioning: true}); err != nil {
		t.Fatal(err)
	}
	const n = 16
	for i := range n {
		m := coretest.Text(fmt.Sprint(i))
		m.PartitionKey = fmt.Sprintf("k%d", i)
		if _, err := b.Send(ctx, "p", m); err != nil {
			t.Fatal(err)
		}
	}
	var toks []core.LockToken
	for len(toks) < n {
		got, err := b.Receive(ctx, "p", core.ReceiveOptions{Mode: core.PeekLock, Max: n})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range got {
			toks = append(toks, m.LockToken)
		}
	}
	for g, be := range tr.backends {
		if c, err := be.Counts("p"); err != nil || c.Active == 0 {
			t.Fatalf("group %d holds %+v (%v): the keys must reach both groups", g+1, c, err)
		}
	}
	meet := &meeting{n: 2, all: make(chan struct{})}
	sr.backend = func(_ uint64, be core.Backend) core.Backend { return meetingBackend{Backend: be, meet: meet} }
	for i, err := range b.CompleteMany("p", toks, true) {
		if err != nil {
			t.Fatalf("completion %d: %v", i, err)
		}
	}
	if c, err := b.Counts("p"); err != nil || c.Total != 0 {
		t.Fatalf("counts %+v (%v) after completing every message", c, err)
	}
}

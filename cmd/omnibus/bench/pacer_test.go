package bench

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// fakeWaiter records the times the pacer waits for and returns at once.
type fakeWaiter struct {
	mu    sync.Mutex // guards asked
	asked []time.Time
}

func (w *fakeWaiter) wait(until time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.asked = append(w.asked, until)
	return nil
}

func (w *fakeWaiter) close() {}

// Every slot is handed out once, in order, carrying start + i/rate as
// its time and waited for to exactly that time: each send is paced on
// its own schedule, not on a tick, and a late one keeps its time.
func TestPacerHandsOutEachSlotAtItsScheduledTime(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	p := newPacer(7, 1000, start)
	p.due = make(chan time.Time)
	w := &fakeWaiter{}
	ctx := t.Context()
	go p.tick(ctx, w)

	var got []time.Time
	for {
		sched, ok := p.claim(ctx)
		if !ok {
			break
		}
		got = append(got, sched)
	}
	if len(got) != 7 {
		t.Fatalf("%d slots handed out, want 7", len(got))
	}
	for i, sched := range got {
		want := start.Add(time.Duration(i) * time.Millisecond)
		if !sched.Equal(want) {
			t.Errorf("slot %d scheduled at %v after start, want %v", i, sched.Sub(start), want.Sub(start))
		}
		if !w.asked[i].Equal(want) {
			t.Errorf("slot %d waited for %v after start, want %v", i, w.asked[i].Sub(start), want.Sub(start))
		}
	}
}

// Concurrent claimers share the slots without loss or duplicates.
func TestPacerSharesSlotsAmongSenders(t *testing.T) {
	start := time.Now().Add(-time.Hour) // every slot overdue: catch up at once
	p := newPacer(500, 10000, start)
	stop := p.begin(t.Context())
	defer stop()
	var mu sync.Mutex
	seen := map[time.Time]int{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				sched, ok := p.claim(t.Context())
				if !ok {
					return
				}
				mu.Lock()
				seen[sched]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != 500 {
		t.Fatalf("%d distinct slots, want 500", len(seen))
	}
	for sched, n := range seen {
		if n != 1 {
			t.Errorf("slot at %v handed out %d times", sched.Sub(start), n)
		}
	}
}

// Without a rate the pacer counts slots and needs no ticker.
func TestPacerWithoutRate(t *testing.T) {
	p := newPacer(3, 0, time.Now())
	defer p.begin(t.Context())()
	n := 0
	for {
		if _, ok := p.claim(t.Context()); !ok {
			break
		}
		n++
	}
	if n != 3 {
		t.Errorf("%d slots, want 3", n)
	}
}

// The platform's waiter returns at once for a time gone by and ends a
// long wait when its context ends.
func TestSlotWaiterEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	w := newSlotWaiter(ctx)
	defer w.close()
	if err := w.wait(time.Now().Add(-time.Second)); err != nil {
		t.Fatalf("wait for a past time: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- w.wait(time.Now().Add(time.Hour)) }()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("wait after cancel: %v, want context.Canceled", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("a wait an hour long did not end when its context did")
	}
}

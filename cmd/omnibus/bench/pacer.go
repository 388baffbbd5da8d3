package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// pacer hands out message slots to sender goroutines: at most count of
// them (0: until the context ends), each at its scheduled time when a
// target rate is set. Slot i is scheduled at start + i/rate, whatever
// happened before it: a late slot is handed out at once and the ones
// after it keep their times, so a slow broker or a busy client makes the
// sends catch up instead of shifting the schedule.
//
// The scheduled time is what the message carries as its send timestamp,
// so a slow broker cannot hide queueing delay in the sender (no
// coordinated omission). That makes the pacer's own precision part of
// every end-to-end latency; see [newSlotWaiter] for how it waits.
type pacer struct {
	count int64
	rate  float64
	start time.Time
	gate  *backlogGate // nil: slots regardless of the backlog

	next atomic.Int64   // without a rate: slots handed out so far
	due  chan time.Time // with a rate: slots whose time came, in order; closed at the end
	once sync.Once      // starts the ticker
}

// newPacer returns a pacer for count slots (0: unbounded) at rate per
// second (0: as fast as they are claimed) from start.
func newPacer(count int64, rate float64, start time.Time) *pacer {
	return &pacer{count: count, rate: rate, start: start}
}

// bounded makes claim wait for room under gate's bound first.
func (p *pacer) bounded(gate *backlogGate) *pacer {
	p.gate = gate
	return p
}

// slot returns the scheduled time of slot i.
func (p *pacer) slot(i int64) time.Time {
	return p.start.Add(time.Duration(float64(i) / p.rate * float64(time.Second)))
}

// begin starts handing out slots until ctx ends or count were handed
// out; the returned func stops it and waits. Without a rate there is
// nothing to start.
func (p *pacer) begin(ctx context.Context) (stop func()) {
	if p.rate <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	p.due = make(chan time.Time)
	var wg sync.WaitGroup
	wg.Go(func() {
		w := newSlotWaiter(ctx)
		defer w.close()
		p.tick(ctx, w)
	})
	return func() { cancel(); wg.Wait() }
}

// slotWaiter waits until a time, or returns an error when its context
// ended.
type slotWaiter interface {
	wait(until time.Time) error
	close()
}

// tick hands out the slots in order, each once w says its time came.
func (p *pacer) tick(ctx context.Context, w slotWaiter) {
	defer close(p.due)
	for i := int64(0); p.count == 0 || i < p.count; i++ {
		sched := p.slot(i)
		if err := w.wait(sched); err != nil {
			if ctx.Err() != nil {
				return
			}
			w = timerWaiter{ctx} // the timerfd failed: pace on a Go timer
			if w.wait(sched) != nil {
				return
			}
		}
		select {
		case p.due <- sched:
		case <-ctx.Done():
			return
		}
	}
}

// claim waits for room under the backlog bound (when bounded) and for
// the next slot, and returns its scheduled time; ok is false when the
// run has sent enough or ctx ended. With a rate, [begin] must have been
// called.
func (p *pacer) claim(ctx context.Context) (sched time.Time, ok bool) {
	if ctx.Err() != nil || !p.gate.admit(ctx) {
		return time.Time{}, false
	}
	if p.rate <= 0 {
		if i := p.next.Add(1) - 1; p.count > 0 && i >= p.count {
			return time.Time{}, false
		}
		return time.Now(), true
	}
	select {
	case sched, ok = <-p.due:
		return sched, ok
	case <-ctx.Done():
		return time.Time{}, false
	}
}

// timerWaiter waits on a Go timer. Go's timers are precise while the
// process is busy, but an idle process waits for them in the network
// poller, whose sleep has millisecond resolution on Linux: a wait of
// less than a millisecond ends up to a millisecond late.
type timerWaiter struct{ ctx context.Context }

func (w timerWaiter) wait(until time.Time) error {
	d := time.Until(until)
	if d <= 0 {
		return w.ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-w.ctx.Done():
		return w.ctx.Err()
	}
}

func (timerWaiter) close() {}

package bench

import (
	"context"
	"time"
)

// errorPause spaces one sending goroutine's attempts after failures. A
// link the broker detached (its leader lost the lease, say) fails every
// send at once, and a sender that tried again at once spun: in a
// cluster-scale run whose one-group leader lost its lease for a moment,
// 25 generators failed 8 million sends each in two minutes, taking the
// machine's CPU from the nodes they measured. The first failure waits
// firstErrorPause, each further one twice as long up to maxErrorPause,
// and a success resets it; a run without failures never waits.
type errorPause struct{ next time.Duration }

const (
	firstErrorPause = 10 * time.Millisecond
	maxErrorPause   = time.Second
)

// after waits as err says (nothing when it is nil); false when ctx ended
// meanwhile. The senders pass the context of their claims: once the run
// stops starting sends, a pause holds nothing back and ends.
func (e *errorPause) after(ctx context.Context, err error) bool {
	if err == nil {
		e.next = 0
		return true
	}
	e.next = min(max(2*e.next, firstErrorPause), maxErrorPause)
	return Sleep(ctx, e.next)
}

// Sleep waits d, or less if ctx ends (false).
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

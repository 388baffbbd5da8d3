package namespace

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Catching up on an unknown name. A shared registry (Config.Shared) takes
// the changes other processes made at its next Sync, so for a moment a
// namespace created through one process is unknown to another. Before
// refusing a key name "rule@ns" whose namespace it does not know, Resolve
// asks Shared.CatchUp once to bring the registry up to date, and looks
// again. So that a flood of unknown names does not become a flood of
// requests to what keeps the records, catch-ups run one at a time, at
// least CatchUpInterval apart, and every request that arrives while one
// waits to start shares it; a request waits at most CatchUpTimeout (then
// it is refused, as before).
const (
	// CatchUpInterval is the least time between two catch-ups of one
	// registry: at most one request per interval to what keeps the
	// records, whatever the number of unknown names asked.
	CatchUpInterval = 100 * time.Millisecond
	// CatchUpTimeout bounds how long a request naming an unknown
	// namespace waits for a catch-up.
	CatchUpTimeout = 2 * time.Second
)

// catchUps coalesces the catch-ups of a registry.
type catchUps struct {
	mu       sync.Mutex
	running  bool          // a round is waiting to start or under way
	done     chan struct{} // closed when the running round ends
	asked    uint64        // rounds whose request has started
	finished uint64        // rounds ended (rounds run one at a time)
	last     time.Time     // when the last round ended
	err      error         // what the last round ended with (nil: caught up)
}

// catchUp returns once a catch-up that started after the call has ended,
// with what it answered (nil: the registry is up to date), or once
// CatchUpTimeout passed, with that error.
func (r *Registry) catchUp() error {
	ctx, cancel := context.WithTimeout(context.Background(), CatchUpTimeout)
	defer cancel()
	c := &r.catchUps
	c.mu.Lock()
	need := c.asked + 1 // the next round to start asks after this call began
	for c.finished < need {
		if c.running {
			done := c.done
			c.mu.Unlock()
			select {
			case <-done:
			case <-ctx.Done():
				return ctx.Err()
			}
			c.mu.Lock()
			continue
		}
		c.running, c.done = true, make(chan struct{})
		wait := CatchUpInterval - time.Since(c.last)
		c.mu.Unlock()
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
		}
		c.mu.Lock()
		c.asked++
		round := c.asked
		c.mu.Unlock()
		err := r.cfg.Shared.CatchUp(ctx)
		if err != nil {
			r.log.Debug("catching up with the shared namespace registry", zap.Error(err))
		}
		c.mu.Lock()
		c.finished, c.last, c.running, c.err = round, time.Now(), false, err
		close(c.done)
	}
	err := c.err
	c.mu.Unlock()
	return err
}

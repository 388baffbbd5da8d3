package amqpserver

import (
	"errors"
	"fmt"
	"net"
	"time"

	"go.uber.org/zap"
)

// Accept back-off, as net/http's: the wait after a failed accept doubles
// from minAcceptBackoff up to maxAcceptBackoff and starts again after a
// success.
const (
	minAcceptBackoff = 5 * time.Millisecond
	maxAcceptBackoff = time.Second
	// acceptLogEvery is the least time between two warnings about the
	// same streak of failed accepts.
	acceptLogEvery = 10 * time.Second
	// acceptHealthWindow is how long after its last failed accept a
	// listener still counts as failing when no accept has succeeded
	// since: failures come at least once a maxAcceptBackoff while they
	// last, so a quiet window means accept is waiting for peers again.
	acceptHealthWindow = 5 * maxAcceptBackoff
)

// listenerState is what the server knows about one listener it serves.
// Its fields are guarded by Server.mu.
type listenerState struct {
	addr     net.Addr
	lastErr  error     // the last failed accept since the last success
	lastAt   time.Time // when lastErr happened
	since    time.Time // first failure of the current streak
	failures int       // failures in the current streak
	loggedAt time.Time // last warning about the streak
	logged   int       // failures covered by warnings so far
}

// acceptFailedLocked records a failed accept and returns how long to wait
// before the next one, and whether the failure should be logged now (the
// first of a streak, then at most once per acceptLogEvery).
func (st *listenerState) acceptFailedLocked(err error, now time.Time) (wait time.Duration, logNow bool) {
	if st.failures == 0 {
		st.since = now
	}
	st.failures++
	st.lastErr, st.lastAt = err, now
	wait = minAcceptBackoff << min(st.failures-1, 10)
	wait = min(wait, maxAcceptBackoff)
	if st.failures == 1 || now.Sub(st.loggedAt) >= acceptLogEvery {
		st.loggedAt, st.logged = now, st.failures
		return wait, true
	}
	return wait, false
}

// acceptedLocked records a successful accept; it returns the number of
// failures of the streak it ends (0 when there was none).
func (st *listenerState) acceptedLocked() int {
	n := st.failures
	st.failures, st.logged, st.lastErr = 0, 0, nil
	return n
}

// failingLocked returns the listener's accept error if it is failing at
// now: an accept failed lately and none has succeeded since.
func (st *listenerState) failingLocked(now time.Time) error {
	if st.lastErr == nil || now.Sub(st.lastAt) >= acceptHealthWindow {
		return nil
	}
	return fmt.Errorf("AMQP listener %s: accept failing since %s (%d errors): %w",
		st.addr, st.since.UTC().Format(time.RFC3339), st.failures, st.lastErr)
}

// acceptFailed handles a failed accept on l: it logs (rate-limited) and
// waits the back-off. It reports false if the server shut down meanwhile.
func (s *Server) acceptFailed(l net.Listener, err error) bool {
	s.mu.Lock()
	st := s.mu.listeners[l]
	wait, logNow := st.acceptFailedLocked(err, time.Now())
	failures := st.failures
	s.mu.Unlock()
	if logNow {
		s.log.Warn("accepting an AMQP connection failed; retrying", zap.Stringer("listener", st.addr),
			zap.Error(err), zap.Int("failures", failures), zap.Duration("backoff", wait))
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.quit:
		return false
	}
}

// accepted records a successful accept on l, logging the end of a streak
// of failures.
func (s *Server) accepted(l net.Listener) {
	s.mu.Lock()
	st := s.mu.listeners[l]
	if st.failures == 0 {
		s.mu.Unlock()
		return
	}
	since := st.since
	n := st.acceptedLocked()
	s.mu.Unlock()
	s.log.Info("accepting AMQP connections again", zap.Stringer("listener", st.addr),
		zap.Int("failures", n), zap.Duration("after", time.Since(since)))
}

// Health reports whether the server is serving: nil while every listener
// it serves accepts connections, otherwise an error naming each listener
// whose accepts fail (with the last error, for example EMFILE when the
// process is out of file descriptors) or whose Serve ended on an error.
// Accepts are retried with a back-off, so a failing listener becomes
// healthy again on its own once accepts succeed. After [Server.Shutdown]
// it returns [ErrServerClosed]. A server not yet serving any listener is
// healthy.
func (s *Server) Health() error {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return ErrServerClosed
	}
	var errs []error
	for _, st := range s.mu.listeners {
		if err := st.failingLocked(now); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, s.mu.lost...)
	return errors.Join(errs...)
}

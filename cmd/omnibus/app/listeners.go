package app

import (
	"fmt"
	"net"
	"sync"
	"time"
)

// acceptFailureWindow is how long a failed accept keeps a listener
// reported as failing when no accept has succeeded since. The servers
// retry a failing accept at least once a second, so a lasting failure is
// seen again well within it.
const acceptFailureWindow = 3 * time.Second

// listenerHealth is what /health knows of one listener: whether its serve
// loop still runs, and whether accepting fails right now (EMFILE).
type listenerHealth struct {
	mu struct {
		sync.Mutex           // guards the fields below
		failure    error     // the last failed accept, nil once one succeeds
		failedAt   time.Time // when it failed
		stopped    error     // why the serve loop ended, nil while it runs
	}
}

// watch returns l reporting its accepts to h.
func (h *listenerHealth) watch(l net.Listener) net.Listener { return &watchedListener{l, h} }

// accepted records the outcome of an accept.
func (h *listenerHealth) accepted(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mu.failure = err
	if err != nil {
		h.mu.failedAt = time.Now()
	}
}

// stop records that the serve loop ended with err.
func (h *listenerHealth) stop(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mu.stopped = err
}

// Health returns nil while the listener accepts connections.
func (h *listenerHealth) Health() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mu.stopped != nil {
		return fmt.Errorf("not accepting connections: %v", h.mu.stopped)
	}
	if h.mu.failure != nil && time.Since(h.mu.failedAt) < acceptFailureWindow {
		return fmt.Errorf("accepting connections fails (retrying): %v", h.mu.failure)
	}
	return nil
}

// watchedListener reports every accept to its listenerHealth. Errors are
// returned unchanged: the servers retry on their type (net.Error).
type watchedListener struct {
	net.Listener
	h *listenerHealth
}

func (l *watchedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	l.h.accepted(err)
	return c, err
}

package pebblestore

import (
	"sync"

	"github.com/omnibusmq/omnibus/storage"
)

// gate admits calls into the store until it is closed, and lets the closer
// wait for the calls already admitted. Unlike a sync.RWMutex held for
// reading, entering it again from inside a call (a Get from a Scan callback)
// cannot deadlock against a waiting closer: it fails with ErrClosed instead.
// The closer waits on a channel, so that it can stop waiting for calls
// that a blocked disk holds forever (see Store.Close).
type gate struct {
	mu     sync.Mutex // guards the fields below
	closed bool
	active int           // calls admitted and not yet left
	idle   chan struct{} // made by close; closed when active drops to 0
}

func newGate() *gate { return &gate{} }

// enter admits a call, or returns ErrClosed. Each successful enter must be
// paired with one leave.
func (g *gate) enter() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return storage.ErrClosed
	}
	g.active++
	return nil
}

// leave ends a call admitted by enter.
func (g *gate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.active--
	if g.closed && g.active == 0 {
		close(g.idle)
	}
}

// close refuses further calls and returns a channel closed once every
// admitted call has left. It returns ErrClosed if the gate was already
// closed.
func (g *gate) close() (<-chan struct{}, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, storage.ErrClosed
	}
	g.closed = true
	g.idle = make(chan struct{})
	if g.active == 0 {
		close(g.idle)
	}
	return g.idle, nil
}

// isClosed reports whether close was called.
func (g *gate) isClosed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

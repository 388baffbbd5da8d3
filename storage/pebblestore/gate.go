package pebblestore

import (
	"sync"

	"github.com/omnibusmq/omnibus/storage"
)

// gate admits calls into the store until it is closed, and lets the closer
// wait for the calls already admitted. Unlike a sync.RWMutex held for
// reading, entering it again from inside a call (a Get from a Scan callback)
// cannot deadlock against a waiting closer: it fails with ErrClosed instead.
type gate struct {
	mu     sync.Mutex // guards the fields below
	closed bool
	active int        // calls admitted and not yet left
	idle   *sync.Cond // signalled when closed and active drops to 0
}

func newGate() *gate {
	g := &gate{}
	g.idle = sync.NewCond(&g.mu)
	return g
}

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
		g.idle.Broadcast()
	}
}

// close refuses further calls and waits until every admitted call has left.
// It returns ErrClosed if the gate was already closed.
func (g *gate) close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return storage.ErrClosed
	}
	g.closed = true
	for g.active > 0 {
		g.idle.Wait()
	}
	return nil
}

package soak

import (
	"context"
	"sync"
	"time"

	"github.com/Azure/go-amqp"
)

// redialPause is how long a client waits between two failed attempts to
// connect to a broker that is down.
const redialPause = 10 * time.Millisecond

// endpoint keeps one AMQP connection with one session and one link L,
// and replaces all three when they fail: the reconnection a client needs
// across broker restarts. Goroutines sharing it get the current link
// with its generation, and report a failure with that generation, so
// that one broken connection is replaced once however many goroutines
// saw it fail.
type endpoint[L any] struct {
	dial   func(context.Context) (*amqp.Conn, error)
	attach func(context.Context, *amqp.Session) (L, error)
	life   *lifeClock // told of each connection, for the recovery figures

	mu      sync.Mutex // guards the fields below; held while connecting
	gen     int        // generation of link; bumped by each new connection
	conn    *amqp.Conn // nil when there is none
	link    L
	redials int // connections made after the first
}

// get returns the current link and its generation, connecting first if
// there is none. It waits for the broker as long as ctx allows.
func (e *endpoint[L]) get(ctx context.Context) (L, int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for e.conn == nil {
		if err := ctx.Err(); err != nil {
			var zero L
			return zero, 0, err
		}
		if err := e.connectLocked(ctx); err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(redialPause):
			}
		}
	}
	return e.link, e.gen, nil
}

func (e *endpoint[L]) connectLocked(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	lf := e.life.current() // before dialing: a connection belongs to the life it was made in
	conn, err := e.dial(ctx)
	if err != nil {
		return err
	}
	lf.connected()
	s, err := conn.NewSession(ctx, nil)
	if err != nil {
		conn.Close()
		return err
	}
	link, err := e.attach(ctx, s)
	if err != nil {
		conn.Close()
		return err
	}
	if e.gen > 0 {
		e.redials++
	}
	e.conn, e.link = conn, link
	e.gen++
	return nil
}

// broken reports that the link of generation gen failed: its connection
// is closed and the next get makes a new one.
func (e *endpoint[L]) broken(gen int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.gen == gen && e.conn != nil {
		e.conn.Close()
		e.conn = nil
	}
}

// close closes the current connection for good.
func (e *endpoint[L]) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.conn != nil {
		e.conn.Close()
		e.conn = nil
	}
}

// reconnects is how many connections were made after the first.
func (e *endpoint[L]) reconnects() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.redials
}

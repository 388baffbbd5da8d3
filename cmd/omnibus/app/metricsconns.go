package app

import (
	"container/list"
	"context"
	"net"
	"net/http"
	"sync"
)

// evictingListener bounds the connections of a listener whose requests
// are quick (the metrics listener) without letting idle ones starve it.
// netutil.LimitListener made a new connection wait for a slot: sixteen
// idle keep-alives, or sixteen clients sending half a request, kept the
// next scrape waiting for as long as they were renewed. Here, at the
// bound, a new connection takes the place of the one that has gone
// longest without a request being served (idle between requests, or
// still sending one: neither is being answered), which is closed. Only
// when every connection is being answered is the new one closed instead.
//
// A server serving it sets ConnState to [evictingListener.connState] and
// ConnContext to [evictingListener.connContext], and wraps its handler in
// [evictingListener.serving].
type evictingListener struct {
	net.Listener
	max int

	mu struct {
		sync.Mutex           // guards the fields below and every evictableConn's elem and answering
		conns      list.List // of *evictableConn: all open, longest unanswered first
	}
}

// evictableConn is a connection of an evictingListener.
type evictableConn struct {
	net.Conn
	l         *evictingListener
	elem      *list.Element // in l.mu.conns; nil once closed or evicted
	answering bool          // a handler is answering a request of it
}

func newEvictingListener(l net.Listener, max int) *evictingListener {
	return &evictingListener{Listener: l, max: max}
}

// Accept returns the next connection, making room for it at the bound.
// Errors of the underlying listener are returned as they are, so the
// server's retry of temporary errors (EMFILE) still applies.
func (l *evictingListener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c, victim := l.admit(nc)
		if victim != nil {
			_ = victim.Conn.Close() // the server's read fails and it closes its side
		}
		if c != nil {
			return c, nil
		}
		_ = nc.Close() // every connection is being answered
	}
}

// admit makes nc a connection of l, evicting the longest unanswered one
// at the bound (returned for the caller to close). It returns nil when
// every connection is being answered.
func (l *evictingListener) admit(nc net.Conn) (c, victim *evictableConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.conns.Len() >= l.max {
		for e := l.mu.conns.Front(); e != nil; e = e.Next() {
			if old := e.Value.(*evictableConn); !old.answering {
				victim = old
				break
			}
		}
		if victim == nil {
			return nil, nil
		}
		l.mu.conns.Remove(victim.elem)
		victim.elem = nil
	}
	c = &evictableConn{Conn: nc, l: l}
	c.elem = l.mu.conns.PushBack(c)
	return c, victim
}

// Close closes the connection and gives up its place.
func (c *evictableConn) Close() error {
	c.l.mu.Lock()
	if c.elem != nil {
		c.l.mu.conns.Remove(c.elem)
		c.elem = nil
	}
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// evictableConnKey carries a request's *evictableConn in its context.
type evictableConnKey struct{}

// connContext is the server's ConnContext: it lets serving find the
// request's connection.
func (l *evictingListener) connContext(ctx context.Context, nc net.Conn) context.Context {
	if c, ok := nc.(*evictableConn); ok {
		return context.WithValue(ctx, evictableConnKey{}, c)
	}
	return ctx
}

// serving wraps the server's handler: while it answers a request, the
// request's connection is not evicted. A request whose connection was
// evicted after it was read, before its handler began, is not answered:
// writing to the closed socket would only fail (and log).
func (l *evictingListener) serving(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(evictableConnKey{}).(*evictableConn); ok {
			l.mu.Lock()
			evicted := c.elem == nil
			c.answering = !evicted
			l.mu.Unlock()
			if evicted {
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// connState is the server's ConnState: once a connection's answer is
// written (it turns idle), it may be evicted again, after every
// connection that has waited longer.
func (l *evictingListener) connState(nc net.Conn, state http.ConnState) {
	c, ok := nc.(*evictableConn)
	if !ok || state != http.StateIdle {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	c.answering = false
	if c.elem != nil {
		l.mu.conns.MoveToBack(c.elem)
	}
}

// open reports the connections held (for tests).
func (l *evictingListener) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.conns.Len()
}

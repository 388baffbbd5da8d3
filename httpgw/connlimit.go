package httpgw

import (
	"container/list"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Bounds of the refusals the connection cap writes (plain HTTP only).
const (
	maxRefusing    = 64              // refusals being written at once; beyond, a refused connection is just closed
	refusalTimeout = 2 * time.Second // time to write the 503 and read what the peer already sent
	refusalDrain   = 64 << 10        // bytes of the peer's request read before closing, so the 503 is not lost to a reset
	refusalLogGap  = 10 * time.Second
)

// Listener wraps l for servers made by [Gateway.Server]: it applies the
// connection cap ([Config.MaxConnections], shared by every listener of
// the gateway) and, when tlsConf is set, TLS.
//
// At the cap, a new connection takes the place of the connection that
// has waited longest with no request in progress (a keep-alive between
// requests, or one that has not sent its first request yet): that one is
// closed, as an idle timeout would close it. When every connection has a
// request in progress the new one is refused: over plain HTTP it gets
// 503 ServerBusy, over TLS it is closed.
func (g *Gateway) Listener(l net.Listener, tlsConf *tls.Config) net.Listener {
	if g.conns.max > 0 {
		l = &limitedListener{Listener: l, lim: g.conns, plain: tlsConf == nil}
	}
	if tlsConf != nil {
		l = tls.NewListener(l, tlsConf)
	}
	return l
}

// connLimiter counts the gateway's connections and keeps, in order, those
// with no request in progress: the candidates to make room at the cap.
type connLimiter struct {
	max int // <= 0: unlimited
	log *zap.Logger

	mu struct {
		sync.Mutex           // guards the fields below and every limitedConn's elem and counted
		open       int       // connections holding a slot
		waiting    list.List // of *limitedConn with no request in progress, longest waiting first
		refusing   int       // refusals being written
		refused    int       // refusals since the last log line
		loggedAt   time.Time
	}
}

func newConnLimiter(max int, log *zap.Logger) *connLimiter {
	return &connLimiter{max: max, log: log}
}

// limitedConn is a connection holding one of the limiter's slots until it
// is closed or evicted.
type limitedConn struct {
	net.Conn
	lim     *connLimiter
	elem    *list.Element // in lim.mu.waiting; nil while a request is in progress
	counted bool          // holds a slot
}

// Close closes the connection and frees its slot.
func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.lim.mu.Lock()
	c.lim.forgetLocked(c)
	c.lim.mu.Unlock()
	return err
}

// forgetLocked takes c out of the waiting list and frees its slot.
func (lim *connLimiter) forgetLocked(c *limitedConn) {
	if c.elem != nil {
		lim.mu.waiting.Remove(c.elem)
		c.elem = nil
	}
	if c.counted {
		c.counted = false
		lim.mu.open--
	}
}

// admit gives nc a slot. At the cap it takes the slot of the connection
// waiting longest, returned as victim for the caller to close; with none
// waiting it returns nil.
func (lim *connLimiter) admit(nc net.Conn) (c, victim *limitedConn) {
	lim.mu.Lock()
	defer lim.mu.Unlock()
	c = &limitedConn{Conn: nc, lim: lim, counted: true}
	if lim.mu.open < lim.max {
		lim.mu.open++
		return c, nil
	}
	front := lim.mu.waiting.Front()
	if front == nil {
		return nil, nil
	}
	victim = front.Value.(*limitedConn)
	lim.forgetLocked(victim)
	lim.mu.open++
	return c, victim
}

// connState is the servers' [http.Server.ConnState] hook: a connection
// with no request in progress joins the end of the waiting list, one
// with a request leaves it.
func (lim *connLimiter) connState(nc net.Conn, state http.ConnState) {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	c, ok := nc.(*limitedConn)
	if !ok {
		return
	}
	lim.mu.Lock()
	defer lim.mu.Unlock()
	switch state {
	case http.StateNew, http.StateIdle:
		if c.counted && c.elem == nil {
			c.elem = lim.mu.waiting.PushBack(c)
		}
	case http.StateActive, http.StateClosed, http.StateHijacked:
		if c.elem != nil {
			lim.mu.waiting.Remove(c.elem)
			c.elem = nil
		}
	}
}

// openConns reports the connections holding a slot.
func (lim *connLimiter) openConns() int {
	lim.mu.Lock()
	defer lim.mu.Unlock()
	return lim.mu.open
}

// limitedListener applies a connLimiter to a listener's connections.
type limitedListener struct {
	net.Listener
	lim   *connLimiter
	plain bool // plain HTTP: refusals get a 503
}

// Accept returns the next admitted connection. Errors of the underlying
// listener are returned as they are, so the server's retry of temporary
// errors (EMFILE) still applies.
func (l *limitedListener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c, victim := l.lim.admit(nc)
		if victim != nil {
			_ = victim.Conn.Close() // the server sees the read fail and closes its side
		}
		if c != nil {
			return c, nil
		}
		l.lim.refuse(nc, l.plain)
	}
}

// refuse turns away a connection over the cap: a 503 over plain HTTP
// (written by a bounded number of goroutines), a close otherwise.
func (lim *connLimiter) refuse(nc net.Conn, plain bool) {
	lim.mu.Lock()
	lim.mu.refused++
	if now := time.Now(); now.Sub(lim.mu.loggedAt) >= refusalLogGap {
		lim.log.Warn("HTTP connection cap reached, every connection busy; refusing new ones",
			zap.Int("max", lim.max), zap.Int("refused", lim.mu.refused))
		lim.mu.loggedAt, lim.mu.refused = now, 0
	}
	write := plain && lim.mu.refusing < maxRefusing
	if write {
		lim.mu.refusing++
	}
	lim.mu.Unlock()
	if !write {
		_ = nc.Close()
		return
	}
	go func() {
		defer func() {
			lim.mu.Lock()
			lim.mu.refusing--
			lim.mu.Unlock()
		}()
		writeRefusal(nc, lim.max)
	}()
}

// writeRefusal answers 503 ServerBusy on a connection never given to the
// server, then closes it. It reads what the peer sent before closing so
// that the answer is not lost to a TCP reset.
func writeRefusal(nc net.Conn, max int) {
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(refusalTimeout))
	body := fmt.Sprintf("<Error><Code>503</Code><Detail>SubCode=50004. The server is busy: all of its %d HTTP connections have a request in progress. Retry shortly.</Detail></Error>", max)
	resp := "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/xml; charset=utf-8\r\n" +
		"Retry-After: 1\r\nConnection: close\r\nServer: omnibus\r\n" +
		fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)) + body
	if _, err := io.WriteString(nc, resp); err != nil {
		return
	}
	if cw, ok := nc.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_, _ = io.CopyN(io.Discard, nc, refusalDrain)
}

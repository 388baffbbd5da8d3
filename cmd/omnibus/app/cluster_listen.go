package app

import (
	"errors"
	"net"
	"sync"
	"time"

	"go.uber.org/zap"
)

// publicFront is one client listener of a cluster node. It outlives every
// broker the node runs.
type publicFront struct {
	name string
	l    net.Listener
}

// accept hands each connection to the local broker or the proxy.
func (cl *Cluster) accept(f *publicFront) {
	backoff := 5 * time.Millisecond
	for {
		conn, err := f.l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// EMFILE and the like: refuse work, never end the process.
			cl.log.Warn("accept failed; retrying", zap.String("front", f.name), zap.Error(err))
			time.Sleep(backoff)
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		if !cl.serveLocally(f.name, conn) {
			cl.proxy.handle(f.name, conn)
		}
	}
}

// serveLocally hands conn to the local broker if this node serves now.
// The connection is fenced: once the Session is no longer valid, not one
// more byte is written to the client.
func (cl *Cluster) serveLocally(front string, conn net.Conn) bool {
	cl.mu.Lock()
	st := cl.serving
	cl.mu.Unlock()
	if st == nil {
		return false
	}
	if st.always {
		l := st.local[front]
		return l != nil && l.deliver(conn, func() bool { return true })
	}
	if !st.sess.Valid() {
		return false
	}
	l := st.local[front]
	return l != nil && l.deliver(conn, st.sess.Valid)
}

// errFenced is what a write to a client gets once this node may no longer
// be the only leader.
var errFenced = errors.New("omnibus: this node is no longer the leader")

// fencedConn checks, before every write to the client, that the Session
// it is served under is still valid; if not it closes the connection
// instead of writing.
type fencedConn struct {
	net.Conn
	valid  func() bool
	closed func() // once, on Close
	once   sync.Once
}

func (c *fencedConn) Write(b []byte) (int, error) {
	if !c.valid() {
		c.Close()
		return 0, errFenced
	}
	return c.Conn.Write(b)
}

func (c *fencedConn) Close() error {
	c.once.Do(c.closed)
	return c.Conn.Close()
}

// chanListener is the listener a local broker's front serves: the
// cluster's accept loop delivers the connections. Its Close (by the
// front's shutdown) stops Accept; cut closes every connection it handed
// out and refuses more.
type chanListener struct {
	addr net.Addr
	ch   chan net.Conn
	done chan struct{} // closed by Close

	mu     sync.Mutex // guards the fields below
	closed bool       // Close was called
	cutOff bool       // cut was called: deliver refuses
	conns  map[*fencedConn]struct{}
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{addr: addr, ch: make(chan net.Conn), done: make(chan struct{}),
		conns: map[*fencedConn]struct{}{}}
}

// deliver hands conn to the front, fenced by valid. It returns false,
// leaving conn alone, when the listener is closed or cut.
func (l *chanListener) deliver(conn net.Conn, valid func() bool) bool {
	fc := &fencedConn{Conn: conn, valid: valid}
	fc.closed = func() {
		l.mu.Lock()
		delete(l.conns, fc)
		l.mu.Unlock()
	}
	l.mu.Lock()
	if l.closed || l.cutOff {
		l.mu.Unlock()
		return false
	}
	l.conns[fc] = struct{}{}
	l.mu.Unlock()
	select {
	case l.ch <- fc:
		return true
	case <-l.done:
		l.mu.Lock()
		delete(l.conns, fc)
		l.mu.Unlock()
		return false
	}
}

// Accept implements net.Listener.
func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener. The connections already handed out stay
// the front's.
func (l *chanListener) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		close(l.done)
	}
	return nil
}

// Addr implements net.Listener: the public listener's address.
func (l *chanListener) Addr() net.Addr { return l.addr }

// cut refuses further connections and closes every one handed out.
func (l *chanListener) cut() {
	l.mu.Lock()
	l.cutOff = true
	conns := make([]*fencedConn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

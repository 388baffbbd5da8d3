package bench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/gorilla/websocket"

	"github.com/omnibusmq/omnibus/amqpserver/wsconn"
)

// maxUnwritten bounds the bytes a coalescingConn holds for the socket:
// beyond it Write waits, so a peer that stops reading stops the sender.
const maxUnwritten = 4 << 20

// closeFlushTimeout bounds how long Close waits to write what is queued.
const closeFlushTimeout = time.Second

// coalescingConn is a net.Conn whose writes are gathered and written by
// one goroutine: every Write made while the socket is busy goes out in
// the next system call. go-amqp writes each frame with its own system
// call (and sets a deadline for each), which costs the load generator a
// large part of its CPU — CPU the broker under test then cannot use, on
// a machine where both share the cores. The broker sees the same bytes
// in the same order.
//
// Write copies p and returns at once (as a write into the kernel's socket
// buffer would); a failed socket write is returned by the next Write.
// Write deadlines are not applied: the run's own duration and Close bound
// a stuck peer.
type coalescingConn struct {
	net.Conn

	mu      sync.Mutex
	changed *sync.Cond // buf, closing or err changed
	buf     []byte     // bytes not yet handed to the socket
	spare   []byte     // the other buffer, reused
	writing bool       // the writer holds bytes it has not written yet
	closing bool       // Close was called: write what is queued, then stop
	err     error      // sticky: the socket failed or the conn is closed
}

func newCoalescingConn(nc net.Conn) *coalescingConn {
	c := &coalescingConn{Conn: nc}
	c.changed = sync.NewCond(&c.mu)
	go c.writeLoop()
	return c
}

func (c *coalescingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.buf) >= maxUnwritten && c.err == nil && !c.closing {
		c.changed.Wait()
	}
	if c.err != nil {
		return 0, c.err
	}
	if c.closing {
		return 0, net.ErrClosed
	}
	if len(c.buf) == 0 {
		c.changed.Broadcast()
	}
	c.buf = append(c.buf, p...)
	return len(p), nil
}

// SetWriteDeadline is accepted and ignored (see coalescingConn).
func (c *coalescingConn) SetWriteDeadline(time.Time) error { return nil }

// SetDeadline applies t to reads only (see coalescingConn).
func (c *coalescingConn) SetDeadline(t time.Time) error { return c.Conn.SetReadDeadline(t) }

// writeLoop writes everything queued, a system call per batch, until
// the conn fails or is closed and drained.
func (c *coalescingConn) writeLoop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		for len(c.buf) == 0 && c.err == nil && !c.closing {
			c.changed.Wait()
		}
		if c.err != nil || len(c.buf) == 0 {
			return // failed, or closing with nothing left to write
		}
		// Let the goroutines that are ready to write (go-amqp's muxes and
		// writer, other callers) add their frames first: at full rate one
		// yield gathers several frames into the write.
		c.mu.Unlock()
		runtime.Gosched()
		c.mu.Lock()
		out := c.buf
		c.buf, c.spare = c.spare[:0], nil
		c.writing = true
		c.changed.Broadcast() // room for blocked writers
		c.mu.Unlock()
		_, err := c.Conn.Write(out)
		c.mu.Lock()
		c.writing = false
		c.spare = out[:0]
		if err != nil && c.err == nil {
			c.err = err
		}
		c.changed.Broadcast()
	}
}

// Close writes what is queued (for at most closeFlushTimeout) and closes
// the socket.
func (c *coalescingConn) Close() error {
	_ = c.Conn.SetWriteDeadline(time.Now().Add(closeFlushTimeout))
	c.mu.Lock()
	c.closing = true
	c.changed.Broadcast()
	for (len(c.buf) > 0 || c.writing) && c.err == nil {
		c.changed.Wait()
	}
	if c.err == nil {
		c.err = net.ErrClosed
	}
	c.changed.Broadcast()
	c.mu.Unlock()
	return c.Conn.Close()
}

// dialAMQP opens an AMQP connection to rawURL: amqp://, amqps:// (TLS,
// trusting roots), or ws:// or wss:// (AMQP over WebSockets, subprotocol
// AMQPWSB10). A coalescingConn gathers go-amqp's writes over whatever
// carries them (the socket, the TLS stream, the WebSocket), so that every
// transport costs the load generator alike: a write is one TLS record or
// one WebSocket message per batch of frames, not per frame. With direct,
// go-amqp writes to the connection itself, a system call per frame, as
// it does in an application (--direct-writes).
func dialAMQP(ctx context.Context, rawURL string, opts *amqp.ConnOptions, roots *x509.CertPool, direct bool) (*amqp.Conn, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	var port string
	var secure, ws bool
	switch u.Scheme {
	case "amqp", "":
		port = "5672"
	case "amqps", "amqp+ssl":
		port, secure = "5671", true
	case "ws":
		port, ws = "80", true
	case "wss":
		port, secure, ws = "443", true, true
	default:
		return nil, fmt.Errorf("unsupported scheme %q", u.Scheme)
	}
	host := u.Hostname()
	if u.Port() != "" {
		port = u.Port()
	}
	cp := *opts
	if cp.HostName == "" {
		cp.HostName = host
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, err
	}
	if secure {
		tc := tls.Client(conn, &tls.Config{ServerName: host, RootCAs: roots})
		if err := tc.HandshakeContext(ctx); err != nil {
			tc.Close()
			return nil, err
		}
		conn = tc
	}
	if ws {
		given := conn
		wd := websocket.Dialer{Subprotocols: []string{"AMQPWSB10"}, ReadBufferSize: 64 << 10, WriteBufferSize: 64 << 10,
			NetDialContext:    func(context.Context, string, string) (net.Conn, error) { return given, nil },
			NetDialTLSContext: func(context.Context, string, string) (net.Conn, error) { return given, nil }}
		c, resp, err := wd.DialContext(ctx, u.String(), nil)
		if resp != nil && resp.Body != nil {
			resp.Body.Close()
		}
		if err != nil {
			given.Close()
			return nil, fmt.Errorf("WebSocket upgrade: %w", err)
		}
		conn = wsconn.New(c)
	}
	if direct {
		return amqp.NewConn(ctx, conn, &cp)
	}
	return amqp.NewConn(ctx, newCoalescingConn(conn), &cp)
}

// trustedRoots returns the system's roots plus the certificates of
// caFile (none when it is empty).
func trustedRoots(caFile string) (*x509.CertPool, error) {
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	if caFile == "" {
		return roots, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("--ca-file: %w", err)
	}
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--ca-file %s holds no certificate", caFile)
	}
	return roots, nil
}

package raftstore

import (
	"bufio"
	"crypto/tls"
	"net"
	"sync"
)

// recordBatcher is the TCP connection under a stream's TLS. TLS writes a
// record per 16 KiB, each with a write of its own into the socket; while
// a frame of at most batchFrameBytes is written, the batcher gathers them
// and writes them in one call. On loopback, where the sender's write does
// the kernel's TCP work for both ends, a 100 KiB append was seven system
// calls instead of one, and TLS doubled the transport's CPU.
type recordBatcher struct {
	net.Conn

	mu      sync.Mutex // guards the fields below, and orders writes into Conn
	holding bool
	buf     []byte
}

// batchFrameBytes: larger frames are written record by record (a record
// per 16 KiB costs little beside their size, and they are not copied).
const batchFrameBytes = 1 << 20

func (c *recordBatcher) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.holding {
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// hold starts gathering writes.
func (c *recordBatcher) hold() {
	c.mu.Lock()
	c.holding = true
	c.mu.Unlock()
}

// flush writes what was gathered, in one call, and stops gathering.
func (c *recordBatcher) flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.holding = false
	if len(c.buf) == 0 {
		return nil
	}
	_, err := c.Conn.Write(c.buf)
	if cap(c.buf) > 2*batchFrameBytes {
		c.buf = nil
	} else {
		c.buf = c.buf[:0]
	}
	return err
}

// readBufConn is a connection the peer port accepted, under its TLS. Once
// it carries a stream (its client was authenticated), reads from the
// socket go through a buffer, so that TLS's reads of each record (its
// header, then the rest) take one system call per readBufBytes instead of
// one or two per 16 KiB. A connection not yet admitted reads unbuffered:
// a stranger's connections cost no buffer.
type readBufConn struct {
	net.Conn
	r *bufio.Reader // nil until buffered; only the connection's reader touches it
}

func (c *readBufConn) Read(p []byte) (int, error) {
	if c.r != nil {
		return c.r.Read(p)
	}
	return c.Conn.Read(p)
}

// bufferReads makes the socket under conn, if a readBufConn, read through
// a buffer from now on. Call it from the goroutine that reads conn.
func bufferReads(conn net.Conn) {
	tc, ok := conn.(*tls.Conn)
	if !ok {
		return
	}
	if c, ok := tc.NetConn().(*readBufConn); ok && c.r == nil {
		c.r = bufio.NewReaderSize(c.Conn, readBufBytes)
	}
}

// readBufListener hands out readBufConns.
type readBufListener struct{ net.Listener }

func (l readBufListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &readBufConn{Conn: c}, nil
}

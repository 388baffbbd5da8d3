package clusterrpc

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// MaxFrameBytes bounds a frame: a send of the largest batch a Raft entry
// takes (raftstore.MaxBatchBytes, 104 MiB) plus its framing. A frame's
// buffer grows as its bytes arrive, never from the length a peer claims.
const MaxFrameBytes = 112 << 20

// writeTimeout bounds one frame's write (plus a second per MiB): a peer
// that stopped reading loses its connection.
const writeTimeout = 5 * time.Second

// Liveness: a client pings every pingEvery, which the server answers; an
// end that reads nothing for silenceLimit closes the connection (a peer
// frozen or cut off without a reset), failing the calls under way.
const (
	pingEvery    = time.Second
	silenceLimit = 5 * time.Second
)

// frameConn writes whole frames from several goroutines and reads them
// from one. Writes are gathered: a frame is appended to what waits to be
// written, and one writer goroutine writes everything that waits in one
// system call (one TLS record run), so a burst of answers costs a write,
// not one each.
type frameConn struct {
	nc      net.Conn
	br      *bufio.Reader
	silence time.Duration // a read gives up after this long without a byte

	mu      sync.Mutex // guards the fields below
	pending []byte     // frames waiting for the writer
	spare   []byte     // the writer's last buffer, reused
	err     error      // the write that failed; every later write fails with it
	wake    chan struct{}
	closed  chan struct{}
	started bool
}

func newFrameConn(nc net.Conn, br *bufio.Reader) *frameConn {
	if br == nil {
		br = bufio.NewReaderSize(nc, 64<<10)
	}
	return &frameConn{nc: nc, br: br, silence: silenceLimit, wake: make(chan struct{}, 1), closed: make(chan struct{})}
}

// write queues one frame (payload without its length) for the writer.
func (c *frameConn) write(payload []byte) error { return c.writeFrame(payload, nil) }

// writeFrame queues the frame whose payload is head then body: both are
// copied straight into what waits for the writer, so a caller that puts a
// call id before encoded arguments (or a status before a result) needs no
// buffer of its own for the whole frame.
func (c *frameConn) writeFrame(head, body []byte) error {
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(head)+len(body)))
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return c.err
	}
	c.pending = append(append(append(c.pending, hdr[:]...), head...), body...)
	if !c.started {
		c.started = true
		go c.writeLoop()
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return nil
}

// writeLoop writes what waits, all of it at once, until the connection
// closes or a write fails (which closes it).
func (c *frameConn) writeLoop() {
	for {
		select {
		case <-c.wake:
		case <-c.closed:
			return
		}
		c.mu.Lock()
		buf := c.pending
		c.pending, c.spare = c.spare[:0], nil // each buffer has one owner at a time
		c.mu.Unlock()
		if len(buf) == 0 {
			continue
		}
		limit := writeTimeout + time.Duration(len(buf)>>20)*time.Second
		err := c.nc.SetWriteDeadline(time.Now().Add(limit))
		if err == nil {
			_, err = c.nc.Write(buf)
		}
		c.mu.Lock()
		if cap(buf) <= 1<<20 {
			c.spare = buf[:0]
		}
		if err != nil && c.err == nil {
			c.err = err
		}
		c.mu.Unlock()
		if err != nil {
			c.nc.Close() // the reader fails, and with it every call waiting
			return
		}
	}
}

// read reads the next frame's payload into buf (reused when it fits).
func (c *frameConn) read(buf []byte) ([]byte, error) {
	var hdr [4]byte
	if err := c.mayWait(len(hdr)); err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(c.br, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > MaxFrameBytes {
		return nil, fmt.Errorf("clusterrpc: a frame of %d bytes is over the cap of %d", n, MaxFrameBytes)
	}
	if cap(buf) >= int(n) {
		buf = buf[:n]
		if err := c.mayWait(int(n)); err != nil {
			return nil, err
		}
		_, err := io.ReadFull(c.br, buf)
		return buf, err
	}
	buf = buf[:0]
	for len(buf) < int(n) {
		step := min(int(n)-len(buf), max(len(buf), 1<<20))
		buf = append(buf, make([]byte, step)...)
		if err := c.mayWait(step); err != nil {
			return nil, err
		}
		if _, err := io.ReadFull(c.br, buf[len(buf)-step:]); err != nil {
			return nil, err
		}
	}
	return buf, nil
}

// mayWait readies a read of n bytes: one the buffered reader cannot serve
// from what it holds may wait for the peer, so the read deadline moves to
// silence from now. One it can serve returns at once and needs none: a
// burst of frames read in one system call sets the deadline once, not
// once a frame (each a timer update, time.Now included).
func (c *frameConn) mayWait(n int) error {
	if c.br.Buffered() >= n {
		return nil
	}
	return c.nc.SetReadDeadline(time.Now().Add(c.silence))
}

func (c *frameConn) close() error {
	c.mu.Lock()
	select {
	case <-c.closed:
	default:
		close(c.closed)
	}
	c.mu.Unlock()
	return c.nc.Close()
}

package amqpserver

import (
	"errors"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// maxOutbox bounds the bytes waiting for the socket: beyond it the
// connection goroutine waits for the writer instead of buffering more
// (backpressure from a peer that does not read).
const maxOutbox = 4 << 20

// keepWriteBuffer is the largest write buffer kept for reuse after a
// write of at most that much: a bigger one, which a burst of large
// deliveries grew, is kept only while the output it carries stays that
// large (the next burst would grow it again, copying and zeroing as it
// goes: a fifth of a 64 KiB delivery's CPU), and dropped after the first
// small write, so a connection that went idle (whose heartbeats are
// small writes) does not pin it.
const keepWriteBuffer = 1 << 20

// reuseWriteBuffer returns b emptied for the next output, or nil when b
// is bigger than keepWriteBuffer and the output it last carried (used
// bytes) was not.
func reuseWriteBuffer(b []byte, used int) []byte {
	if cap(b) > keepWriteBuffer && used <= keepWriteBuffer {
		return nil
	}
	return b[:0]
}

// outbox hands output from run to writeLoop. run appends each burst of
// frames; writeLoop takes everything accumulated since its last write and
// writes it with one system call, so the frames of bursts made while the
// socket was busy share a write. run's pending output, buf and the
// buffer writeLoop writes rotate between the two (a burst handed to an
// idle writer becomes buf as it is, without a copy), so steady output
// allocates and copies nothing more.
type outbox struct {
	mu     sync.Mutex
	buf    []byte       // bytes waiting for writeLoop
	size   atomic.Int64 // len(buf), readable without mu
	closed bool         // no more output: writeLoop exits once buf is written
	failed bool         // a write failed: output is dropped

	wake    chan struct{} // (cap 1) buf got bytes, or closed was set
	drained chan struct{} // (cap 1) writeLoop took buf
}

func newOutbox() outbox {
	return outbox{wake: make(chan struct{}, 1), drained: make(chan struct{}, 1)}
}

// signal makes a non-blocking send of a wake-up on ch (cap 1): one
// pending wake-up covers any number of signals.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// enqueue appends p to the output, waiting while the output is over
// maxOutbox, and returns an empty buffer for the next output. When
// writeLoop has taken all the output before (the usual case), p becomes
// the output as it is, without a copy, and the buffer returned is the
// one writeLoop gave back; otherwise p is copied and returned emptied.
// Either way the caller no longer owns p.
func (c *conn) enqueue(p []byte) []byte {
	o := &c.ob
	o.mu.Lock()
	for len(o.buf) >= maxOutbox && !o.failed {
		o.mu.Unlock()
		select {
		case <-o.drained:
		case <-c.wdone:
			return p[:0]
		}
		o.mu.Lock()
	}
	if o.failed || o.closed {
		o.mu.Unlock()
		return p[:0]
	}
	first := len(o.buf) == 0
	next := p[:0]
	if first {
		next, o.buf = o.buf[:0], p
	} else {
		o.buf = append(o.buf, p...)
	}
	o.size.Store(int64(len(o.buf)))
	o.mu.Unlock()
	if first {
		signal(o.wake)
	}
	return next
}

// closeOutput lets writeLoop exit once it has written what is queued.
func (c *conn) closeOutput() {
	c.ob.mu.Lock()
	c.ob.closed = true
	c.ob.mu.Unlock()
	signal(c.ob.wake)
}

// writeLoop writes the output until it is closed and written, or a write
// fails. Each wake-up writes all output queued so far in one write.
func (c *conn) writeLoop() {
	defer close(c.wdone)
	o := &c.ob
	var p []byte
	idle := c.srv.cfg.IdleTimeout
	var deadline time.Time // the write deadline set last
	for range o.wake {
		o.mu.Lock()
		p, o.buf = o.buf, p[:0]
		o.size.Store(0)
		closed := o.closed
		o.mu.Unlock()
		signal(o.drained)
		if len(p) > 0 {
			// As readLoop's: moved once the time left is below the idle
			// timeout, so a write still gets at least that long.
			if now := time.Now(); deadline.Sub(now) < idle {
				deadline = now.Add(idle + idle/16)
				c.nc.SetWriteDeadline(deadline)
			}
			if _, err := c.nc.Write(p); err != nil {
				o.mu.Lock()
				o.failed, o.buf = true, nil
				o.size.Store(0)
				o.mu.Unlock()
				if !peerGone(err) {
					c.cancel()
				}
				return
			}
			p = reuseWriteBuffer(p, len(p))
		}
		if closed {
			return
		}
	}
}

// peerGone reports whether a write failed because the peer closed or
// reset the connection. The connection then ends through its reader,
// which still reads what the peer sent before it went (settlements
// flushed just before a hang-up, say) and then fails on its own; any
// other write failure (a peer that stopped reading until the write
// timed out) ends the connection at once.
func peerGone(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

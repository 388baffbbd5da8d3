package amqpserver

import (
	"errors"
	"net"
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

// outbox hands output from run to writeLoop. run hands over each
// burst of frames in the buffer it wrote them into; writeLoop takes every
// buffer handed over since its last write and writes them with one
// system call (writev on TCP), so the bursts made while the socket was
// busy share a write without being copied together. A small burst joins
// the buffer before it when that has room, so that connections whose
// net.Conn writes each buffer on its own (TLS, WebSockets) do not turn
// a stream of small bursts into as many writes. The emptied buffers come
// back to run through free, so steady output allocates nothing.
type outbox struct {
	mu     sync.Mutex
	bufs   [][]byte     // output waiting for writeLoop, in order
	free   [][]byte     // written buffers, emptied, for run's next bursts
	size   atomic.Int64 // bytes in bufs, readable without mu
	closed bool         // no more output: writeLoop exits once bufs is written
	failed bool         // a write failed: output is dropped

	wake    chan struct{} // (cap 1) bufs got bytes, or closed was set
	drained chan struct{} // (cap 1) writeLoop took bufs
}

// Bounds of the outbox's buffers: a burst of at most coalesceBelow bytes
// joins the buffer before it; at most maxFreeBuffers written buffers wait
// in free (each at most keepWriteBuffer, so an idle connection keeps at
// most a few MiB, and one whose last bursts were small far less).
const (
	coalesceBelow  = 4 << 10
	maxFreeBuffers = 4
)

// handOffAt is the size at which run hands the frames it has written to
// writeLoop in the middle of a pass: the buffers then stay well under
// keepWriteBuffer (and are reused), and a long burst reaches the socket
// while the rest of it is being encoded.
const handOffAt = 256 << 10

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

// enqueue hands p to writeLoop, waiting while the output is over
// maxOutbox, and returns an empty buffer for the next output: one
// writeLoop gave back, or p emptied when p joined the buffer before it
// (or the output is closed). Either way the caller no longer owns p's
// bytes.
func (c *conn) enqueue(p []byte) []byte {
	o := &c.ob
	o.mu.Lock()
	for o.size.Load() >= maxOutbox && !o.failed {
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
	first := len(o.bufs) == 0
	var next []byte
	if n := len(o.bufs); n > 0 && len(p) <= coalesceBelow && cap(o.bufs[n-1])-len(o.bufs[n-1]) >= len(p) {
		o.bufs[n-1] = append(o.bufs[n-1], p...)
		next = p[:0]
	} else {
		o.bufs = append(o.bufs, p)
		if n := len(o.free); n > 0 {
			next, o.free[n-1] = o.free[n-1], nil
			o.free = o.free[:n-1]
		}
	}
	o.size.Add(int64(len(p)))
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
	var taken [][]byte   // the buffers being written
	var iovs net.Buffers // taken's slices, which writing consumes
	idle := c.srv.cfg.IdleTimeout
	var deadline time.Time // the write deadline set last
	for range o.wake {
		o.mu.Lock()
		taken, o.bufs = o.bufs, taken[:0]
		o.size.Store(0)
		closed := o.closed
		o.mu.Unlock()
		signal(o.drained)
		if len(taken) > 0 {
			// As readLoop's: moved once the time left is below the idle
			// timeout, so a write still gets at least that long.
			if now := time.Now(); deadline.Sub(now) < idle {
				deadline = now.Add(idle + idle/16)
				c.nc.SetWriteDeadline(deadline)
			}
			iovs = append(iovs[:0], taken...)
			iov := iovs
			_, err := iov.WriteTo(c.nc) // one writev on TCP; Write by Write otherwise
			clear(iovs)
			if err != nil {
				o.mu.Lock()
				o.failed, o.bufs = true, nil
				o.size.Store(0)
				o.mu.Unlock()
				if !peerGone(err) {
					c.cancel()
				}
				return
			}
			o.mu.Lock()
			for _, b := range taken {
				if b = reuseWriteBuffer(b, len(b)); b != nil && len(o.free) < maxFreeBuffers {
					o.free = append(o.free, b)
				}
			}
			o.mu.Unlock()
			clear(taken)
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

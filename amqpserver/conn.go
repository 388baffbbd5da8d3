package amqpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/amqpserver/wsconn"
	"github.com/omnibusmq/omnibus/core/namespace"
)

var connIDs atomic.Uint64

// conn is one AMQP connection. Three goroutines serve it:
//
//   - readLoop decodes frames from the socket and handles them itself,
//     each read's frames in one pass (readPass);
//   - run (the mux) handles the rest: work posted by the goroutines that
//     do what blocks (core sends, receives, settlements, management
//     calls; inbox.go), heartbeats, lifetime and shutdown;
//   - writeLoop owns the socket's write side and writes what the passes
//     queued, in order, one write per wake-up (writer.go).
//
// The sessions, links and delivery maps are touched only under mu, which
// readLoop and run each hold for a whole pass (a pass ends with a
// flush), so the connection's state still has one owner at a time and
// frames and posted work take effect in the order they were taken.
type conn struct {
	srv  *Server
	nc   net.Conn
	log  *zap.Logger // a scope of its own under the server's LogLimiter
	rd   *frames.Reader
	auth *connAuth

	// ns is the connection's namespace (namespace.go); helpers read it,
	// serve and then run change it until nsBound is set, by run alone.
	ns      atomic.Pointer[namespace.Namespace]
	nsBound bool
	plain   *plainLogin // a PLAIN login to settle at the open (sasl.go); owned by serve
	// nsCounted is the namespace the connection counts against
	// (namespace.go), nil until it does; written under srv.mu by serve,
	// then run.
	nsCounted *namespace.Namespace

	props propsDecoder // application properties of the messages sent on the connection (run's)

	// Negotiated at open; fixed afterwards.
	peerMaxFrame uint32        // largest frame we may send
	peerIdle     time.Duration // the peer's idle-time-out (0 = none)
	channelMax   uint16        // highest channel the peer may begin
	containerID  string        // the peer's: a JMS client's client id (jms.go)
	jmsProvider  *jmsProvider  // a Service Bus JMS client's settings, nil for others (jmsauto.go)

	ctx    context.Context    // cancelled when the connection ends
	cancel context.CancelFunc // cancels ctx
	in     inbox              // work for run, posted by helper goroutines
	ob     outbox             // encoded frames for writeLoop
	wdone  chan struct{}      // closed when writeLoop has exited
	work   sync.WaitGroup     // helper goroutines (sends, receives, settles)

	// mu is held by the goroutine making a pass (readLoop or run); what
	// this file and others call "owned by run" is guarded by it.
	mu      sync.Mutex
	stopped bool // run has returned: readLoop makes no further pass

	// Owned by run (guarded by mu).
	sessions map[uint16]*session // by the peer's channel
	local    map[uint16]*session // by our channel
	links    int                 // handles in use across sessions (attached or awaiting the peer's detach)
	// Outgoing deliveries (outqueue.go).
	outBytes      int        // payload bytes taken for clients and not yet written
	stalled       []*session // sessions waiting for the writer to drain
	bufferWaiters []*link    // links waiting for outBytes to fall (Limits.MaxDeliveryBuffer)
	// Incoming deliveries (incoming.go).
	inBytes    int               // bytes of deliveries read and not yet answered (or handed to a handler)
	inPartial  int               // of which, deliveries whose last frame has not arrived
	starved    []*session        // sessions whose incoming window waits for inBytes to fall
	pending    buffer.Buffer     // frames written since the last flush
	ackers     []*session        // sessions with acknowledgements queued
	senders    []*link           // links with deliveries queued for the broker
	completes  []pendingComplete // accepted deliveries queued for the broker
	completing int               // CompleteMany calls in flight (see completeMany)
	settles    []pendingSettle   // other settlements queued for the broker
	// Transactions (coordinator.go), by txn-id, and the bytes of
	// messages they hold to send.
	txns     map[string]*connTxn
	txnBytes int
	// memHeld is what the connection holds of the memory budget
	// (memory.go); serve gives back what is left when it ends.
	memHeld    int
	memWaiting bool // a wake-up is registered with the budget
	closing    bool // the peer's close arrived: frames are ignored, our close follows (afterOwed)
	closed     bool // our close is written: run returns after this pass

	// Tickets of work whose answers the peer is owed, and the work
	// waiting for them (owed.go). Owned by run.
	nextTicket uint64
	owed       map[uint64]struct{}
	waits      []owedWait
	paying     bool // paid is running the waits

	// Shutdown (drain.go).
	draining bool        // owned by run: answering what was read, then closing
	stopRead atomic.Bool // readLoop reads no further frame

	// Lifetime (lifetime.go), owned by serve, then run.
	authDeadline time.Time   // no credential by then: close; zero once authenticated
	lifeTimer    *time.Timer // fires at authDeadline or the next grant expiry
	lifeArmed    bool        // lifeTimer is set
	opened       bool        // past the handshake; guarded by srv.mu
}

func newConn(s *Server, nc net.Conn) *conn {
	id := strconv.FormatUint(connIDs.Add(1), 10)
	c := &conn{
		srv:      s,
		nc:       nc,
		log:      s.cfg.LogLimiter.Scope(s.cfg.Logger).With(zap.String("conn", id), zap.Stringer("remote", nc.RemoteAddr())),
		rd:       frames.NewReader(nc, s.cfg.PreAuthMaxFrameSize),
		auth:     newConnAuth(s.cfg.Now),
		in:       newInbox(),
		ob:       newOutbox(),
		wdone:    make(chan struct{}),
		sessions: make(map[uint16]*session),
		local:    make(map[uint16]*session),
	}
	c.ns.Store(s.reg.Default())
	return c
}

// serve runs the connection to its end. A panic anywhere in its own
// goroutines is logged and ends only this connection.
func (c *conn) serve(parent context.Context) {
	defer c.nc.Close()
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("panic serving connection", zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
		}
	}()
	deadline := time.Now().Add(defaultHandshakeTimeout)
	if !c.srv.authOff {
		c.authDeadline = time.Now().Add(c.srv.cfg.AuthTimeout)
		if c.authDeadline.Before(deadline) {
			deadline = c.authDeadline
		}
	} else {
		c.credentialAccepted()
	}
	c.nc.SetDeadline(deadline)
	if err := c.handshake(); err != nil {
		if !errors.Is(err, io.EOF) {
			c.log.Debug("handshake failed", zap.Error(err))
		}
		return
	}
	c.nc.SetDeadline(time.Time{})

	c.ctx, c.cancel = context.WithCancel(parent)
	defer c.cancel()

	readErr := make(chan error, 1)
	readDone := make(chan struct{})
	c.startLifetime() // before the reader's first pass, which may re-arm it
	go c.writeLoop()
	go func() {
		defer close(readDone)
		err := errors.New("amqpserver: reader panicked")
		defer func() { readErr <- err }()
		defer c.recoverPanic("reader")
		err = c.readLoop()
	}()
	err := c.run(readErr)
	c.cancel()
	c.closeInbox()
	c.closeOutput()
	<-c.wdone
	c.nc.Close() // unblocks readLoop
	<-readDone
	c.work.Wait() // sends in flight finish (they are durable or fail)
	c.runWaits()  // session locks held back for answers that can no longer be posted
	c.releaseMemory()
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		c.log.Debug("connection ended", zap.Error(err))
	}
}

// readLoop reads frames and handles them (readPass) until the socket
// fails or a frame ends the connection. Each read must finish within our
// idle timeout.
func (c *conn) readLoop() error {
	idle := c.srv.cfg.IdleTimeout
	var deadline time.Time // the read deadline set last
	for {
		// The deadline is moved only once the time left falls below the
		// idle timeout, to idle and a sixteenth ahead: a silent peer is
		// disconnected after idle to 17/16 idle, and a busy connection
		// sets its deadline (a lock and a timer change in the runtime)
		// a few times a second instead of for every frame.
		if now := time.Now(); deadline.Sub(now) < idle {
			deadline = now.Add(idle + idle/16)
			c.nc.SetReadDeadline(deadline)
		}
		if c.stopRead.Load() {
			return errReadStopped
		}
		fr, err := c.rd.ReadFrame()
		if err != nil {
			return err
		}
		if err := c.readPass(fr); err != nil {
			return err
		}
	}
}

// maxPassFrames is how many frames a pass handles before it flushes.
const maxPassFrames = 64

// passEnd is how readLoop reports that a pass ended the connection: the
// frame's error (its close already written) or io.EOF once our close is
// written. run returns err as it is.
type passEnd struct{ err error }

func (e *passEnd) Error() string { return e.err.Error() }

// errRunStopped ends readLoop when run has returned.
var errRunStopped = errors.New("amqpserver: connection loop stopped")

// readPass is a pass of the connection on the reader's goroutine: under
// mu it handles fr and every frame already buffered behind it (up to
// maxPassFrames), runs the work posted meanwhile, and flushes. A frame
// thus reaches its session and link on the goroutine that read it, with
// no hand-over to run, and a read that brought several frames is one
// pass: their sends go to the broker together, their answers in one
// write.
func (c *conn) readPass(fr frames.Frame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return errRunStopped
	}
	err := c.handleFrame(fr)
	for n := 1; err == nil && n < maxPassFrames && !c.stopRead.Load() && c.rd.FrameBuffered(); n++ {
		if fr, err = c.rd.ReadFrame(); err != nil {
			// A read error: run answers it (readFailed) after the
			// frames before it, which are handled.
			return err
		}
		err = c.handleFrame(fr)
	}
	if err == nil {
		c.runReadyPosted()
	}
	if err != nil {
		var ce *connError
		if errors.As(err, &ce) {
			c.write(0, &frames.Close{Error: ce.Err})
		}
		c.flush()
		return &passEnd{err}
	}
	c.endPass()
	if c.closed {
		return &passEnd{io.EOF}
	}
	c.tellRun()
	return nil
}

// tellRun wakes run after a pass made on another goroutine when run must
// look again at what it waits for: sessions stalled on the writer (whose
// drain only run waits for) or our close written (after which run
// returns).
func (c *conn) tellRun() {
	if c.closed || len(c.stalled) > 0 {
		signal(c.in.wake)
	}
}

// maxIdleHelpers is how many idle helper goroutines the server keeps for
// all its connections.
const maxIdleHelpers = 16

// goWork runs f in a helper goroutine that serve waits for. A panic in f
// is logged and closes the connection instead of crashing the server.
// The goroutine comes from the server's pool: helpers commit to the store,
// which needs a deep stack, and a pooled goroutine has grown it already.
func (c *conn) goWork(f func()) {
	c.work.Add(1)
	c.srv.helpers.Go(func() {
		defer c.work.Done()
		defer c.recoverPanic("helper")
		f()
	})
}

// recoverPanic logs a recovered panic and ends the connection.
func (c *conn) recoverPanic(where string) {
	if r := recover(); r != nil {
		c.log.Error("panic in "+where, zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
		c.cancel()
		c.nc.Close()
	}
}

// run is the connection's mux for everything but frames (which readLoop
// handles, readPass): it runs posted work, resumes stalled sessions,
// sends heartbeats and handles lifetime, shutdown and the reader's end
// until the connection closes. Whatever it does, it does under mu, as
// one pass that ends with a flush.
func (c *conn) run(readErr <-chan error) (err error) {
	var beat <-chan time.Time
	if c.peerIdle > 0 {
		t := time.NewTicker(c.peerIdle / 2)
		defer t.Stop()
		beat = t.C
	}
	c.mu.Lock()
	defer func() {
		c.stopped = true
		c.mu.Unlock()
	}()
	defer c.lifeTimer.Stop()
	quit := c.srv.quit
	defer func() {
		for _, s := range c.local {
			s.release()
		}
	}()
	for {
		var drained <-chan struct{}
		if len(c.stalled) > 0 {
			drained = c.ob.drained
		}
		c.mu.Unlock()
		var (
			posted, unstall, heartbeat, lifetime, drain, done bool
			rerr                                              error
		)
		select {
		case <-c.in.wake:
			posted = true
		case <-drained:
			unstall = true
		case <-beat:
			heartbeat = true
		case <-c.lifeTimer.C:
			lifetime = true
		case <-quit:
			quit = nil
			drain = true
		case rerr = <-readErr:
		case <-c.ctx.Done():
			done = true
		}
		c.mu.Lock()
		switch {
		case posted:
			c.runPosted()
		case unstall:
			c.unstall()
		case heartbeat:
			frames.WriteHeartbeat(&c.pending)
		case lifetime:
			err = c.lifetimeCheck()
		case drain:
			c.startDrain()
		case done:
			if !c.closed {
				c.write(0, &frames.Close{Error: errorf(frames.CondConnectionForced, "The server is shutting down.")})
			}
			c.flush()
			return c.ctx.Err()
		default: // the reader ended
			if pe, ok := rerr.(*passEnd); ok {
				return pe.err // its pass wrote and flushed what it owed
			}
			if c.readStopped(rerr) {
				readErr = nil
				err = c.finishDrain()
				break
			}
			// The frames read before the socket failed have been
			// handled, in order: a client that settles and hangs up
			// in one write does not see its settlements lost.
			err = c.readFailed(rerr)
			c.flush()
			return err
		}
		// Take posted work that is ready too before flushing, so that
		// bursts of completions go out in one write.
		for i := 0; i < maxPassFrames && err == nil && c.runReadyPosted(); i++ {
		}
		if err != nil {
			var ce *connError
			if errors.As(err, &ce) {
				c.write(0, &frames.Close{Error: ce.Err})
			}
			c.flush()
			return err
		}
		c.endPass()
		if c.closed {
			return io.EOF
		}
	}
}

// readFailed turns a read error into the close frame the peer should see.
func (c *conn) readFailed(err error) error {
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), c.closing:
		return err
	case errors.As(err, &ne) && ne.Timeout():
		c.write(0, &frames.Close{Error: errorf(frames.CondResourceLimitExceeded,
			"Connection idle for more than %v.", c.srv.cfg.IdleTimeout)})
	case errors.Is(err, frames.ErrFrameTooLarge):
		c.write(0, &frames.Close{Error: errorf(frames.CondFrameSizeTooSmall, "%v", err)})
	case errors.Is(err, frames.ErrFrameTooSmall), errors.Is(err, frames.ErrMalformed):
		c.write(0, &frames.Close{Error: errorf(frames.CondDecodeError, "%v", err)})
	case errors.Is(err, wsconn.ErrNotBinary):
		c.write(0, &frames.Close{Error: errorf(frames.CondDecodeError,
			"AMQP over WebSockets travels in binary messages; a message of another type arrived.")})
	default:
		return err
	}
	return err
}

// handleFrame dispatches one incoming frame.
func (c *conn) handleFrame(fr frames.Frame) error {
	if fr.Type != frames.TypeAMQP {
		return closeWith(frames.CondNotAllowed, "SASL frame after SASL negotiation")
	}
	if ce := c.log.Check(zap.DebugLevel, "RX"); ce != nil {
		ce.Write(zap.Uint16("ch", fr.Channel), zap.String("frame", fmt.Sprintf("%T %+v", fr.Body, fr.Body)))
	}
	switch b := fr.Body.(type) {
	case nil:
		return nil // heartbeat
	case *frames.Open:
		return closeWith(frames.CondNotAllowed, "open received twice")
	case *frames.Close:
		if c.closing {
			return nil
		}
		c.closing = true
		// What the frames before the close asked for is applied first;
		// then the session locks are released, and only then do we
		// answer, so that a client that waits for our close may accept
		// the same sessions elsewhere.
		c.submitPending()
		for _, s := range c.local {
			s.release()
		}
		c.afterOwed(func() {
			c.write(0, &frames.Close{})
			c.closed = true
		})
		return nil
	case *frames.Begin:
		return c.handleBegin(fr.Channel, b)
	case *frames.Detach, *frames.End:
		if !c.closing {
			// Sends and settlements of this pass go to the broker before
			// the link or session goes away (see owed.go).
			c.submitPending()
		}
	}
	if c.closing {
		return nil
	}
	s := c.sessions[fr.Channel]
	if s == nil {
		return closeWith(frames.CondNotAllowed, "frame %T on channel %d without a session", fr.Body, fr.Channel)
	}
	return s.handle(fr.Body)
}

// write appends a frame for channel ch to the pending output.
func (c *conn) write(ch uint16, body frames.Body) {
	if ce := c.log.Check(zap.DebugLevel, "TX"); ce != nil {
		ce.Write(zap.Uint16("ch", ch), zap.String("frame", fmt.Sprintf("%T %+v", body, body)))
	}
	if err := frames.Write(&c.pending, frames.Frame{Channel: ch, Body: body}); err != nil {
		// Our own frames always encode; a failure is a bug worth a log,
		// not a crash.
		c.log.Error("encoding frame", zap.Error(err))
	}
	if c.pending.Len() >= handOffAt {
		c.handOff()
	}
}

// handOff hands the frames written so far to writeLoop.
func (c *conn) handOff() {
	used := c.pending.Size()
	c.pending = buffer.Make(reuseWriteBuffer(c.enqueue(c.pending.Bytes()), used))
}

// submitPending hands the deliveries and settlements queued in this pass
// to the broker, the deliveries of a link whose previous send is in
// flight too (see link.hold).
func (c *conn) submitPending() {
	c.submitQueued(false)
}

// submitQueued hands the deliveries and settlements queued in this pass
// to the broker; with holding, the deliveries of a link whose previous
// send is in flight wait for its answer, their link staying in senders
// for the pass that follows the answer, or for a submitPending before it,
// and so do the connection's completions while a CompleteMany of its is
// in flight (completeMany).
func (c *conn) submitQueued(holding bool) {
	held := 0
	for _, l := range c.senders {
		if holding && l.hold() {
			c.senders[held] = l
			held++
			continue
		}
		l.in.queued = false
		l.submitSends()
	}
	clear(c.senders[held:])
	c.senders = c.senders[:held]
	if !holding || c.completing == 0 {
		c.submitCompletes()
	}
	c.submitSettles()
}

// endPass ends a pass: as flush, but the deliveries of a link whose
// previous send is in flight are held (link.hold), and the completions
// queued while one of the connection's CompleteMany is (completeMany).
func (c *conn) endPass() {
	c.submitQueued(true)
	c.writeOut()
}

// flush sends the deliveries and completions queued for the broker,
// writes queued acknowledgements and hands the pending output to
// writeLoop.
func (c *conn) flush() {
	c.submitPending()
	c.writeOut()
}

// writeOut writes queued acknowledgements and hands the pending output
// to writeLoop.
func (c *conn) writeOut() {
	c.writeQueuedAcks()
	if c.pending.Len() == 0 {
		return
	}
	c.handOff()
}

// writeQueuedAcks writes the acknowledgements queued so far. They wait
// for the end of the pass, to go out as ranges, unless a frame that must
// follow them is written first: the answer to a detach, end or close, or
// our close at a drain (owed.go).
func (c *conn) writeQueuedAcks() {
	for _, s := range c.ackers {
		s.writeAcks()
	}
	c.ackers = c.ackers[:0]
}

// writeNow writes one frame synchronously (handshake phase, before the
// writer runs).
func (c *conn) writeNow(body frames.Body) error {
	var b buffer.Buffer
	if err := frames.Write(&b, frames.Frame{Body: body}); err != nil {
		return err
	}
	_, err := c.nc.Write(b.Bytes())
	return err
}

package clusterrpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/gopool"
)

// Group is a data group this node leads, as the server sees it.
type Group struct {
	Broker *core.Broker
	// Valid reports whether the group's Session (and so its lease) still
	// holds: an answer is written only while it does.
	Valid func() bool
}

// Lookup returns the data group g this node leads now, false if it leads
// none of that number.
type Lookup func(g uint64) (Group, bool)

// MaxCallsPerConn bounds the calls one connection may have under way at
// once (each holds a goroutine, and a blocking receive holds it long).
const MaxCallsPerConn = 100000

// Place is the meta leader's placement service: the data group of the
// queue or topic name, choosing it (suggest, when not 0) and recording it
// if it has none and create is set; 0 when it has none and create is not.
type Place func(ctx context.Context, name string, suggest uint64, create bool) (uint64, error)

// Server answers the calls peers make on the groups this node leads.
type Server struct {
	lookup Lookup
	// Place, when set, answers placement calls (this node leads the meta
	// group). Set it before Serve.
	Place Place
	// Meta, when set, answers the other requests to the meta leader
	// (meta.go). Set it before Serve.
	Meta Meta
	log  *zap.Logger
	// tasks run the calls (all but asynchronous sends, planned on the
	// reading goroutine): a call's goroutine is one kept from an earlier
	// call, its stack grown already by the core's work.
	tasks *gopool.Pool

	mu     sync.Mutex // guards conns and closed
	conns  map[*serverConn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewServer returns a server answering calls on the groups lookup names.
func NewServer(lookup Lookup, log *zap.Logger) *Server {
	if log == nil {
		log = zap.NewNop()
	}
	return &Server{lookup: lookup, log: log, conns: map[*serverConn]struct{}{}, tasks: gopool.New(maxIdleTasks)}
}

// serverConn is one peer's connection.
type serverConn struct {
	s    *Server
	fc   *frameConn
	from uint64

	mu      sync.Mutex // guards the fields below
	calls   map[uint64]context.CancelFunc
	txns    map[uint64]*core.Txn // by id, this connection's
	nextTxn uint64
	// held are the receive answers written whose arrival the peer has
	// not acknowledged yet (opAck), by call id: if the connection ends
	// first, their locks are given back (the peer, or its client, never
	// had the messages; its node may have died with them).
	held map[uint64]heldLocks
}

// heldLocks is what a peek-lock receive answer handed out.
type heldLocks struct {
	g    Group
	path string
	toks []core.LockToken
}

// Serve answers the calls that come on nc from peer node from, until it
// closes or the server does. It owns nc; br holds what was read of it
// already (nil: nothing).
func (s *Server) Serve(nc net.Conn, br *bufio.Reader, from uint64) {
	c := &serverConn{s: s, from: from, calls: map[uint64]context.CancelFunc{}, txns: map[uint64]*core.Txn{}, held: map[uint64]heldLocks{}}
	c.fc = newFrameConn(nc, br)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		nc.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer func() {
		c.fc.close()
		c.mu.Lock()
		for _, cancel := range c.calls {
			cancel()
		}
		txns := c.txns
		c.txns = nil
		held := c.held
		c.held = nil
		c.mu.Unlock()
		for _, t := range txns {
			t.Rollback() // the peer that opened it is gone
		}
		c.releaseHeld(held)
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.wg.Done()
	}()
	var buf []byte
	for {
		payload, err := c.fc.read(buf)
		if err != nil {
			return
		}
		if !c.dispatch(payload) {
			return
		}
		if cap(payload) <= 1<<20 {
			buf = payload[:0] // dispatch copied what it keeps
		} else {
			buf = nil
		}
	}
}

// Close closes every connection and waits for their readers.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.fc.close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.tasks.Close() // the calls still running finish; their goroutines then exit
}

// dispatch decodes one request and runs it: an asynchronous send at once
// (its order on the connection is its order in the queue), anything else
// on a goroutine of its own. It reports false for a frame that does not
// decode, which ends the connection.
func (c *serverConn) dispatch(payload []byte) bool {
	d := &dec{b: payload}
	id := d.uvarint()
	op := d.byte()
	if d.err != nil || op == 0 || op >= opLast {
		c.s.log.Warn("a peer sent a malformed call; closing its connection", zap.Uint64("peer", c.from))
		return false
	}
	if op == opPing {
		e := &enc{}
		e.uvarint(id)
		e.byte(statusOK)
		_ = c.fc.write(e.b)
		return true
	}
	if op == opCancel {
		c.mu.Lock()
		cancel := c.calls[id]
		c.mu.Unlock()
		if cancel != nil {
			cancel()
		}
		return true
	}
	if op == opAck {
		c.mu.Lock()
		delete(c.held, id)
		c.mu.Unlock()
		return true
	}
	group := d.uvarint()
	// The reader reuses payload: what runs on another goroutine gets a
	// copy of its arguments; an asynchronous send is decoded here, into
	// messages of their own (core.ReadMessage copies), and needs none.
	if op == opPlace {
		go c.place(id, bytes.Clone(d.b))
		return true
	}
	if op == opMeta {
		go c.meta(id, bytes.Clone(d.b))
		return true
	}
	g, ok := c.s.lookup(group)
	if !ok {
		c.answerErr(id, notLeading(group))
		return true
	}
	if op == opSendAsync {
		c.sendAsync(id, g, d.b)
		return true
	}
	args := bytes.Clone(d.b)
	ctx, cancel := context.WithCancel(context.Background())
	c.mu.Lock()
	if len(c.calls) >= MaxCallsPerConn {
		c.mu.Unlock()
		cancel()
		c.answerErr(id, &core.Error{Code: core.CodeServerBusy, Msg: "too many calls under way on one connection between nodes"})
		return true
	}
	c.calls[id] = cancel
	c.mu.Unlock()
	c.s.tasks.Go(func() {
		defer func() {
			c.mu.Lock()
			delete(c.calls, id)
			c.mu.Unlock()
			cancel()
		}()
		c.run(ctx, id, g, op, args)
	})
	return true
}

// run makes call id and queues its answer.
func (c *serverConn) run(ctx context.Context, id uint64, g Group, op byte, args []byte) {
	var held heldLocks
	e := getEnc()
	defer e.free() // once the answer, a copy of res, is queued
	res, err := c.call(ctx, g, op, &dec{b: args}, &held, e)
	if err != nil {
		c.answerErr(id, err)
		return
	}
	if committed(op) {
		c.answerCommitted(id, res)
		return
	}
	if len(held.toks) > 0 {
		c.answerHeld(id, g, res, held)
		return
	}
	c.answer(id, g, res)
}

// notLeading is the answer for a group this node does not lead (any
// more): retryable; the caller asks the group's new leader.
func notLeading(g uint64) error {
	return &core.Error{Code: core.CodeServerBusy, Msg: "this node does not lead the entity's group now; retry"}
}

// answer writes a successful answer, if the group's lease still allows it.
func (c *serverConn) answer(id uint64, g Group, res []byte) {
	if !g.Valid() {
		c.answerErr(id, &core.Error{Code: core.CodeServerBusy, Msg: "this node stopped leading the entity's group; retry"})
		return
	}
	c.answerCommitted(id, res)
}

// answerHeld is answer for a receive that locked messages: they are
// held for the peer until it acknowledges the answer's arrival.
func (c *serverConn) answerHeld(id uint64, g Group, res []byte, held heldLocks) {
	if !g.Valid() {
		c.answer(id, g, res) // refused: the locks die with the broker
		return
	}
	held.g = g
	c.mu.Lock()
	if c.held == nil { // the connection ended
		c.mu.Unlock()
		c.releaseHeld(map[uint64]heldLocks{id: held})
		return
	}
	c.held[id] = held
	c.mu.Unlock()
	c.answer(id, g, res)
}

// releaseHeld gives back the locks of receive answers the peer never
// acknowledged: released, as if never delivered (no delivery counted).
// A lock the broker no longer knows (settled, expired, another leader)
// is skipped.
func (c *serverConn) releaseHeld(held map[uint64]heldLocks) {
	n := 0
	for _, h := range held {
		for _, tok := range h.toks {
			if h.g.Broker.Settle(context.Background(), h.path, tok, core.Outcome{Kind: core.Release}) == nil {
				n++
			}
		}
	}
	if n > 0 {
		c.s.log.Info("released the messages of receive answers a peer never acknowledged: its connection ended",
			zap.Uint64("peer", c.from), zap.Int("messages", n))
	}
}

// committed reports whether op's success means its writes are committed
// (sends, settlements): such an answer holds whoever leads the group
// afterwards, so it goes out even once the lease ended. Fencing it turned
// a completion that took effect into a failure (lock lost; the message
// never came back), and a stored send into one the client sends again.
// What is read from the broker's memory (deliveries, locks, renewals,
// listings) stays fenced.
func committed(op byte) bool {
	switch op {
	case opSend, opSendAsync, opSettle, opCompleteMany, opTransfer:
		return true
	}
	return false
}

// answerCommitted writes a successful answer whatever the lease.
func (c *serverConn) answerCommitted(id uint64, res []byte) {
	var head [binary.MaxVarintLen64 + 1]byte
	h := append(binary.AppendUvarint(head[:0], id), statusOK)
	_ = c.fc.writeFrame(h, res)
}

func (c *serverConn) answerErr(id uint64, err error) {
	e := &enc{}
	e.uvarint(id)
	e.byte(statusError)
	e.error(err)
	_ = c.fc.write(e.b)
}

// sendAsync plans a send now and answers once it is durable.
func (c *serverConn) sendAsync(id uint64, g Group, args []byte) {
	d := &dec{b: args}
	path := d.string()
	msgs := d.messages()
	if d.err != nil {
		c.answerErr(id, d.err)
		return
	}
	err := g.Broker.SendAsync(path, msgs, func(seqs []int64, err error) {
		if err != nil {
			c.answerErr(id, err)
			return
		}
		e := &enc{}
		e.int64s(seqs)
		c.answerCommitted(id, e.b)
	})
	if err != nil {
		c.answerErr(id, err)
	}
}

// deadline reads a call's deadline (0: none) into a context.
func withDeadline(ctx context.Context, d *dec) (context.Context, context.CancelFunc) {
	n := d.varint()
	if n == 0 {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, time.Unix(0, n))
}

// place answers a placement call.
func (c *serverConn) place(id uint64, args []byte) {
	d := &dec{b: args}
	name, suggest, create := d.string(), d.uvarint(), d.bool()
	if d.err != nil {
		c.answerErr(id, d.err)
		return
	}
	if c.s.Place == nil {
		c.answerErr(id, &core.Error{Code: core.CodeServerBusy, Msg: "this node does not lead the meta group; retry"})
		return
	}
	g, err := c.s.Place(context.Background(), name, suggest, create)
	if err != nil {
		c.answerErr(id, err)
		return
	}
	e := &enc{}
	e.uvarint(g)
	_ = c.fc.write(append(append(binaryID(id), statusOK), e.b...))
}

// binaryID is a frame's leading call id.
func binaryID(id uint64) []byte {
	e := &enc{}
	e.uvarint(id)
	return e.b
}

package clusterrpc

import (
	"bufio"
	"context"
	"encoding/binary"
	"net"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/gopool"
)

// maxIdleTasks bounds the idle goroutines a client keeps for the answers
// of asynchronous sends (pendingCall.done), and a server for its calls,
// as core keeps its tasks'.
const maxIdleTasks = 16

// Dial opens a connection to a peer's RPC server (over the peer port:
// storage/raftstore's Node.DialPeer); br holds what was read of the
// connection already (the end of the upgrade's answer), nil if nothing.
type Dial func(ctx context.Context) (nc net.Conn, br *bufio.Reader, err error)

// Client makes calls on one peer, over one connection it opens when
// needed and opens again after it broke.
type Client struct {
	dial Dial
	log  *zap.Logger
	// pingEvery and silence are the liveness timing (frame.go); tests
	// shorten them before the first call.
	pingEvery, silence time.Duration
	// Counts, when set before the first call, counts the calls made.
	Counts *CallCounts
	// tasks run the answers of asynchronous sends (pendingCall.done).
	tasks *gopool.Pool

	mu     sync.Mutex // guards the fields below
	cur    *clientConn
	closed bool
}

// NewClient returns a client that reaches its peer with dial.
func NewClient(dial Dial, log *zap.Logger) *Client {
	if log == nil {
		log = zap.NewNop()
	}
	return &Client{dial: dial, log: log, pingEvery: pingEvery, silence: silenceLimit, tasks: gopool.New(maxIdleTasks)}
}

// Close closes the connection; calls under way fail.
func (c *Client) Close() {
	c.mu.Lock()
	c.closed = true
	cur := c.cur
	c.cur = nil
	c.mu.Unlock()
	if cur != nil {
		cur.fail()
	}
	c.tasks.Close() // the answers handed to it still run
}

// clientConn is one connection and the calls waiting on it.
type clientConn struct {
	fc    *frameConn
	tasks *gopool.Pool // the client's

	mu      sync.Mutex // guards the fields below
	next    uint64
	pending map[uint64]*pendingCall
	// orphans are the calls FailGroup failed whose answers, should they
	// still come, hold what the server took for them (locks): each gets
	// its call's orphan function.
	orphans map[uint64]*pendingCall
	broken  bool
}

// pendingCall is a call waiting for its answer.
type pendingCall struct {
	ch chan []byte // the answer's payload after the id; nil when the connection broke
	// done, set instead of ch (an asynchronous send), takes the answer
	// on one of the client's pooled goroutines: no goroutine of its own
	// waits for it while the call is under way, and the answer's work
	// (the front's callback) runs on a stack already grown.
	done    func(ans []byte)
	changes bool // the call may change state: a broken connection leaves its outcome unknown
	group   uint64
	// orphan, when set, gives back what an answer that comes after the
	// call failed holds (the locks of a receive's messages); such an
	// answer is acknowledged (opAck) as soon as it is read, so that the
	// server gives the locks back itself if the connection breaks first.
	orphan func(ans []byte)
}

// deliver hands p its answer (nil: the connection broke).
func (p *pendingCall) deliver(tasks *gopool.Pool, ans []byte) {
	if p.done != nil {
		tasks.Go(func() { p.done(ans) })
		return
	}
	p.ch <- ans
}

// conn returns the live connection, opening one if needed.
func (c *Client) conn(ctx context.Context) (*clientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, busy("the connection to the group's leader is closed")
	}
	if c.cur != nil {
		return c.cur, nil
	}
	nc, br, err := c.dial(ctx)
	if err != nil {
		return nil, &core.Error{Code: core.CodeServerBusy, Msg: "cannot reach the node that leads the entity's group: " + err.Error()}
	}
	cc := &clientConn{fc: newFrameConn(nc, br), tasks: c.tasks, pending: map[uint64]*pendingCall{}, orphans: map[uint64]*pendingCall{}}
	cc.fc.silence = c.silence
	c.cur = cc
	go c.readLoop(cc)
	go cc.pingLoop(c.pingEvery)
	return cc, nil
}

// pingLoop pings the server every pingEvery until the connection ends:
// its answers keep the connection's reads alive (frame.go, silenceLimit).
func (cc *clientConn) pingLoop(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-cc.fc.closed:
			return
		}
		cc.mu.Lock()
		if cc.broken {
			cc.mu.Unlock()
			return
		}
		cc.next++
		id := cc.next
		cc.mu.Unlock()
		e := &enc{}
		e.uvarint(id)
		e.byte(opPing)
		if cc.fc.write(e.b) != nil {
			return
		}
	}
}

// FailGroup fails the calls on group g under way now, as if their
// connection broke: their group has another leader than this peer (a
// caller that sees the election calls it), and the peer, frozen or cut
// off, may never answer. Their answers, should they come, are not
// delivered; what they hold is given back (a receive's locks are
// released), since the peer may lead the group still: the caller's view
// of the election can be wrong or late, and a lock nobody will settle
// would keep its message from every receiver until it expires.
func (c *Client) FailGroup(g uint64) {
	c.FailGroups(g, func(group uint64) bool { return group == g })
}

// FailGroups is FailGroup for every group match says is one of group g
// (a caller that numbers the groups of its calls finer than their Raft
// groups: a data group of one namespace).
func (c *Client) FailGroups(g uint64, match func(group uint64) bool) {
	c.mu.Lock()
	cc := c.cur
	c.mu.Unlock()
	if cc == nil {
		return
	}
	cc.mu.Lock()
	var failed []*pendingCall
	var ids []uint64
	for id, p := range cc.pending {
		if match(p.group) {
			failed = append(failed, p)
			ids = append(ids, id)
			delete(cc.pending, id)
			if p.orphan != nil && cc.orphans != nil {
				cc.orphans[id] = p
			}
		}
	}
	cc.mu.Unlock()
	if len(failed) == 0 {
		return
	}
	c.log.Info("failed the calls under way on a group this node saw elect another leader",
		zap.Uint64("group", g), zap.Int("calls", len(failed)))
	for _, p := range failed {
		p.deliver(c.tasks, nil)
	}
	// A peer that is still there stops waiting for them: a blocked
	// receive then takes nothing.
	for _, id := range ids {
		e := &enc{}
		e.uvarint(id)
		e.byte(opCancel)
		_ = cc.fc.write(e.b)
	}
}

// readLoop hands each answer to its call until the connection ends.
func (c *Client) readLoop(cc *clientConn) {
	var buf []byte
	for {
		payload, err := cc.fc.read(buf)
		if err != nil {
			break
		}
		d := &dec{b: payload}
		id := d.uvarint()
		if d.err != nil {
			break
		}
		cc.mu.Lock()
		p := cc.pending[id]
		delete(cc.pending, id)
		orphan := cc.orphans[id]
		delete(cc.orphans, id)
		cc.mu.Unlock()
		if (p != nil && p.orphan != nil) || orphan != nil {
			e := &enc{}
			e.uvarint(id)
			e.byte(opAck)
			_ = cc.fc.write(e.b)
		}
		switch {
		case p != nil:
			p.deliver(c.tasks, append([]byte(nil), d.b...))
		case orphan != nil:
			go orphan.orphan(append([]byte(nil), d.b...))
		}
		if cap(payload) <= 1<<20 {
			buf = payload[:0]
		} else {
			buf = nil
		}
	}
	c.mu.Lock()
	if c.cur == cc {
		c.cur = nil
	}
	c.mu.Unlock()
	cc.fail()
}

// fail ends the connection and every call waiting on it.
func (cc *clientConn) fail() {
	cc.fc.close()
	cc.mu.Lock()
	cc.broken = true
	pending := cc.pending
	cc.pending, cc.orphans = nil, nil
	cc.mu.Unlock()
	for _, p := range pending {
		p.deliver(cc.tasks, nil)
	}
}

// start sends a request and returns the call to wait on; with done set,
// done takes the answer instead (pendingCall.done), and the call has no
// channel to wait on.
func (c *Client) start(ctx context.Context, op byte, group uint64, args []byte, changes bool, orphan func([]byte), done func([]byte)) (*clientConn, uint64, *pendingCall, error) {
	cc, err := c.conn(ctx)
	if err != nil {
		return nil, 0, nil, err
	}
	c.Counts.add(op)
	p := &pendingCall{done: done, changes: changes, group: group, orphan: orphan}
	if done == nil {
		p.ch = make(chan []byte, 1)
	}
	cc.mu.Lock()
	if cc.broken {
		cc.mu.Unlock()
		return nil, 0, nil, busy("the connection to the group's leader broke")
	}
	cc.next++
	id := cc.next
	cc.pending[id] = p
	cc.mu.Unlock()
	var head [2*binary.MaxVarintLen64 + 1]byte
	h := binary.AppendUvarint(head[:0], id)
	h = append(h, op)
	h = binary.AppendUvarint(h, group)
	if err := cc.fc.writeFrame(h, args); err != nil {
		cc.fail()
		// The request may have gone out whole: its outcome is unknown.
	}
	return cc, id, p, nil
}

// call makes a call and waits for its answer; a blocking one (ctx given)
// is cancelled at the server when ctx ends first, and its answer still
// awaited (it may carry what the server took meanwhile).
func (c *Client) call(ctx context.Context, op byte, group uint64, args []byte, changes bool, orphan func([]byte)) (*dec, error) {
	cc, id, p, err := c.start(ctx, op, group, args, changes, orphan, nil)
	if err != nil {
		return nil, err
	}
	var ans []byte
	select {
	case ans = <-p.ch:
	case <-ctx.Done():
		e := &enc{}
		e.uvarint(id)
		e.byte(opCancel)
		_ = cc.fc.write(e.b)
		ans = <-p.ch
	}
	return answer(ans, p.changes)
}

// answer decodes an answer's status; nil ans is a broken connection.
func answer(ans []byte, changes bool) (*dec, error) {
	if ans == nil {
		if changes {
			return nil, &core.Error{Code: core.CodeOutcomeUnknown, Msg: "the connection to the group's leader broke before it answered; the operation may or may not have been carried out"}
		}
		return nil, busy("the connection to the group's leader broke before it answered")
	}
	d := &dec{b: ans}
	switch d.byte() {
	case statusOK:
		return d, nil
	case statusError:
		return nil, d.error()
	}
	return nil, errMalformed
}

func busy(msg string) error { return &core.Error{Code: core.CodeServerBusy, Msg: msg + "; retry"} }

// Place asks the peer (the meta group's leader) for the data group of the
// queue or topic name, to be recorded with suggest when it has none and
// create is set; 0 when it has none and create is not.
func (c *Client) Place(ctx context.Context, name string, suggest uint64, create bool) (uint64, error) {
	e := &enc{}
	e.string(name)
	e.uvarint(suggest)
	e.bool(create)
	d, err := c.call(context.WithoutCancel(ctx), opPlace, 0, e.b, create, nil)
	if err != nil {
		return 0, err
	}
	g := d.uvarint()
	return g, d.err
}

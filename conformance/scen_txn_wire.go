package conformance

import (
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"
)

// txnConn is a raw AMQP 1.0 connection for the transaction scenarios,
// speaking as the .NET SDK does (Microsoft.Azure.Amqp's Controller and
// Azure.Messaging.ServiceBus's AmqpConnectionScope): a sender link whose
// target is a coordinator, declare and discharge as amqp-value messages
// with an 8-byte counter as delivery tag, transactional-state on
// transfers and on dispositions. One goroutine drives it (the
// scenario's), plus a heartbeat when the endpoint asks for one.
type txnConn struct {
	t        *T
	nc       net.Conn
	wmu      sync.Mutex // guards writes to nc
	pending  []txnFrame // frames read and not yet asked for
	local    map[uint16]uint16
	sessions map[uint16]*txnSession
	nextCh   uint16
	handle   uint32
	tag      uint64
	done     chan struct{}
}

// txnSession is the state of one session: its next outgoing delivery id
// and the incoming transfer count its flows report.
type txnSession struct {
	nextOut uint32
	nextIn  uint32
}

// txnFrame is one AMQP frame read: its (local) channel, performative
// code and fields, and the payload of a transfer.
type txnFrame struct {
	ch      uint16
	code    uint64
	fields  []any
	payload []byte
}

// Performatives, sections and states used (AMQP 1.0 §2.7, §3.2, §3.4,
// §4.5).
const (
	pOpen, pBegin, pAttach, pFlow, pTransfer, pDisposition, pDetach, pEnd, pClose = 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18
	dError                                                                        = 0x1d
	dAccepted, dRejected, dReleased                                               = 0x24, 0x25, 0x26
	dSource, dTarget, dCoordinator                                                = 0x28, 0x29, 0x30
	dDeclare, dDischarge, dDeclared, dTxnState                                    = 0x31, 0x32, 0x33, 0x34
	sData, sValue                                                                 = 0x75, 0x77
)

func described(code uint64, fields ...any) amqpDescribed {
	return amqpDescribed{code: code, value: fields}
}

// txnDial connects to the endpoint as AMQPSession does (AMQPS for an
// ordinary connection string, plain AMQP for the emulator's) and logs in
// with SASL PLAIN. The connection closes when the scenario ends.
func (t *T) txnDial() *txnConn {
	t.live()
	tg := t.target
	host, _, _ := strings.Cut(tg.cs.Host, ":")
	var nc net.Conn
	var err error
	d := &net.Dialer{Timeout: 30 * time.Second}
	if tg.cs.UseDevelopmentEmulator {
		nc, err = d.DialContext(t.ctx, "tcp", tg.AMQPHost())
	} else {
		addr, h := t.amqpsEndpoint()
		host = h
		nc, err = (&tls.Dialer{NetDialer: d, Config: tg.tlsConfig(h)}).DialContext(t.ctx, "tcp", addr)
	}
	t.must(err, "dialing the endpoint for a transaction")
	if dl, ok := t.ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	c := &txnConn{t: t, nc: nc, local: map[uint16]uint16{}, sessions: map[uint16]*txnSession{}, done: make(chan struct{})}
	t.Cleanup(c.close)

	// SASL PLAIN with the connection string's key name and key.
	c.writeRaw([]byte("AMQP\x03\x01\x00\x00"))
	c.readHeader()
	c.await(func(f txnFrame) bool { return f.code == 0x40 }) // sasl-mechanisms
	c.write(0, 1, described(0x41, amqpSymbol("PLAIN"), []byte("\x00"+tg.cs.SharedAccessKeyName+"\x00"+tg.cs.SharedAccessKey), host), nil)
	out := c.await(func(f txnFrame) bool { return f.code == 0x44 })
	if code, _ := field(out.fields, 0).(uint8); code != 0 {
		t.Fatalf("SASL PLAIN refused (code %d)", code)
	}
	c.writeRaw([]byte("AMQP\x00\x01\x00\x00"))
	c.readHeader()
	c.write(0, 0, described(pOpen, "conformance-txn", host, uint32(1<<20), uint16(255)), nil)
	open := c.await(func(f txnFrame) bool { return f.code == pOpen })
	if idle, _ := field(open.fields, 4).(uint32); idle > 0 {
		go c.heartbeat(time.Duration(idle) * time.Millisecond / 2)
	}
	return c
}

// heartbeat writes an empty frame every period until the connection closes.
func (c *txnConn) heartbeat(period time.Duration) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-tick.C:
			c.writeRaw([]byte{0, 0, 0, 8, 2, 0, 0, 0})
		}
	}
}

func (c *txnConn) close() {
	select {
	case <-c.done:
		return
	default:
	}
	close(c.done)
	c.wmu.Lock()
	_ = c.nc.Close()
	c.wmu.Unlock()
}

func (c *txnConn) writeRaw(b []byte) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := c.nc.Write(b); err != nil {
		select {
		case <-c.done:
		default:
			c.t.Fatalf("writing to the endpoint: %v", err)
		}
	}
}

// write sends one frame of type typ (0 AMQP, 1 SASL) on channel ch.
func (c *txnConn) write(ch uint16, typ byte, body amqpDescribed, payload []byte) {
	b := make([]byte, 8, 64+len(payload))
	b = appendAMQP(b, body)
	b = append(b, payload...)
	binary.BigEndian.PutUint32(b, uint32(len(b)))
	b[4], b[5] = 2, typ
	binary.BigEndian.PutUint16(b[6:], ch)
	c.writeRaw(b)
}

func (c *txnConn) readHeader() {
	var h [8]byte
	if _, err := io.ReadFull(c.nc, h[:]); err != nil {
		c.t.Fatalf("reading the endpoint's protocol header: %v", err)
	}
}

// read reads the next frame that has a body (heartbeats are skipped).
func (c *txnConn) read() txnFrame {
	for {
		var h [8]byte
		if _, err := io.ReadFull(c.nc, h[:]); err != nil {
			c.t.Fatalf("reading from the endpoint: %v", err)
		}
		size, doff := binary.BigEndian.Uint32(h[:]), int(h[4])*4
		if size < uint32(doff) || size > 64<<20 {
			c.t.Fatalf("a frame of %d bytes (data offset %d)", size, doff)
		}
		b := make([]byte, size-8)
		if _, err := io.ReadFull(c.nc, b); err != nil {
			c.t.Fatalf("reading from the endpoint: %v", err)
		}
		b = b[doff-8:]
		if len(b) == 0 {
			continue
		}
		v, rest, err := decodeAMQP(b)
		c.t.must(err, "decoding a frame")
		code, fields := describedCode(v)
		ch := binary.BigEndian.Uint16(h[6:])
		if code == pBegin {
			if local, ok := field(fields, 0).(uint16); ok {
				c.local[ch] = local
			}
		}
		if l, ok := c.local[ch]; ok {
			ch = l
		}
		f := txnFrame{ch: ch, code: code, fields: fields, payload: rest}
		if code == pClose {
			c.t.Fatalf("the endpoint closed the connection: %v", errorText(field(fields, 0)))
		}
		if code == pEnd {
			c.t.Fatalf("the endpoint ended session %d: %v", ch, errorText(field(fields, 0)))
		}
		return f
	}
}

// await returns the first frame, earlier read or new, that match accepts.
func (c *txnConn) await(match func(txnFrame) bool) txnFrame {
	for i, f := range c.pending {
		if match(f) {
			c.pending = append(c.pending[:i], c.pending[i+1:]...)
			return f
		}
	}
	for {
		f := c.read()
		if match(f) {
			return f
		}
		c.pending = append(c.pending, f)
	}
}

// begin begins a session and returns its channel.
func (c *txnConn) begin() uint16 {
	ch := c.nextCh
	c.nextCh++
	c.write(ch, 0, described(pBegin, nil, uint32(0), uint32(1<<20), uint32(1<<20), uint32(1023)), nil)
	b := c.await(func(f txnFrame) bool { return f.code == pBegin && f.ch == ch })
	next, _ := field(b.fields, 1).(uint32)
	c.sessions[ch] = &txnSession{nextIn: next}
	return ch
}

// attach attaches a link and returns its handle and the endpoint's
// attach, or the error of the detach refusing it.
func (c *txnConn) attach(ch uint16, receiver bool, source, target any, props amqpMap) (uint32, []any, error) {
	h := c.handle
	c.handle++
	name := fmt.Sprintf("conformance-txn-%d", h)
	var p any
	if len(props) > 0 {
		p = props
	}
	var rcvMode, idc any
	if receiver {
		rcvMode = uint8(1) // second: peek-lock
	} else {
		idc = uint32(0)
	}
	c.write(ch, 0, described(pAttach, name, h, receiver, nil, rcvMode, source, target, nil, nil, idc, nil, nil, nil, p), nil)
	a := c.await(func(f txnFrame) bool { return f.code == pAttach && f.ch == ch && field(f.fields, 1) == h })
	missing := field(a.fields, 5) == nil
	if !receiver {
		missing = field(a.fields, 6) == nil
	}
	if missing {
		d := c.await(func(f txnFrame) bool { return f.code == pDetach && f.ch == ch && field(f.fields, 0) == h })
		return h, nil, fmt.Errorf("attach refused: %s", errorText(field(d.fields, 2)))
	}
	return h, a.fields, nil
}

// attachController attaches a transaction controller on ch, as
// Microsoft.Azure.Amqp's Controller does.
func (c *txnConn) attachController(ch uint16) uint32 {
	name := fmt.Sprintf("conformance-controller-%d", c.handle)
	h, _, err := c.attach(ch, false, described(dSource, name, nil, nil, nil, nil, nil, amqpSymbol("move")), described(dCoordinator), nil)
	c.t.must(err, "attaching a transaction controller")
	return h
}

// attachSender attaches a sender to entity (with the SDK's leading
// slash), with link properties props.
func (c *txnConn) attachSender(ch uint16, entity string, props amqpMap) (uint32, error) {
	h, _, err := c.attach(ch, false, described(dSource, fmt.Sprintf("conformance-src-%d", c.handle)),
		described(dTarget, "/"+entity), props)
	return h, err
}

// attachReceiver attaches a peek-lock receiver to entity and grants it
// credit.
func (c *txnConn) attachReceiver(ch uint16, entity string, credit uint32) uint32 {
	h, fields, err := c.attach(ch, true, described(dSource, "/"+entity), described(dTarget, fmt.Sprintf("conformance-tgt-%d", c.handle)), nil)
	c.t.must(err, "attaching a receiver to %s", entity)
	count, _ := field(fields, 9).(uint32)
	s := c.sessions[ch]
	c.write(ch, 0, described(pFlow, s.nextIn, uint32(1<<20), s.nextOut, uint32(1<<20), h, count, credit), nil)
	return h
}

// receive waits for the next message on handle h and returns its
// delivery id and body (its data or string amqp-value).
func (c *txnConn) receive(ch uint16, h uint32) (uint32, string) {
	f := c.await(func(f txnFrame) bool { return f.code == pTransfer && f.ch == ch && field(f.fields, 0) == h })
	id, _ := field(f.fields, 1).(uint32)
	payload := f.payload
	for more, _ := field(f.fields, 5).(bool); more; more, _ = field(f.fields, 5).(bool) {
		f = c.await(func(f txnFrame) bool { return f.code == pTransfer && f.ch == ch && field(f.fields, 0) == h })
		payload = append(payload, f.payload...)
	}
	c.sessions[ch].nextIn = id + 1
	var body strings.Builder
	for len(payload) > 0 {
		v, rest, err := decodeAMQP(payload)
		c.t.must(err, "decoding a received message")
		payload = rest
		d, _ := v.(amqpDescribed)
		switch code, _ := d.code.(uint64); code {
		case sData:
			b, _ := d.value.([]byte)
			body.Write(b)
		case sValue:
			if s, ok := d.value.(string); ok {
				body.WriteString(s)
			}
		}
	}
	return id, body.String()
}

// transfer sends one message on handle h, with delivery state state
// (nil for none), and returns its delivery id.
func (c *txnConn) transfer(ch uint16, h uint32, state any, message []byte) uint32 {
	s := c.sessions[ch]
	id := s.nextOut
	s.nextOut++
	c.tag++
	c.write(ch, 0, described(pTransfer, h, id, binary.LittleEndian.AppendUint64(nil, c.tag), uint32(0), false, false, nil, state), message)
	return id
}

// outcome waits for the endpoint's disposition of our delivery id and
// returns its state.
func (c *txnConn) outcome(ch uint16, id uint32) any {
	f := c.await(func(f txnFrame) bool {
		if f.code != pDisposition || f.ch != ch || field(f.fields, 0) != true {
			return false
		}
		first, _ := field(f.fields, 1).(uint32)
		last, ok := field(f.fields, 2).(uint32)
		if !ok {
			last = first
		}
		return first <= id && id <= last
	})
	return field(f.fields, 4)
}

// settle settles received delivery id with state, unsettled as the SDK
// does in peek-lock, and returns the endpoint's answering state.
func (c *txnConn) settle(ch uint16, id uint32, state any) any {
	c.write(ch, 0, described(pDisposition, true, id, nil, false, state), nil)
	f := c.await(func(f txnFrame) bool {
		first, _ := field(f.fields, 1).(uint32)
		return f.code == pDisposition && f.ch == ch && field(f.fields, 0) == false && first == id
	})
	return field(f.fields, 4)
}

// declare declares a transaction on the controller (ch, h) and returns
// its id.
func (c *txnConn) declare(ch uint16, h uint32) []byte {
	st := c.outcome(ch, c.transfer(ch, h, nil, valueMessage(described(dDeclare))))
	code, fields := describedCode(st)
	id, _ := field(fields, 0).([]byte)
	if code != dDeclared || len(id) == 0 {
		c.t.Fatalf("declare answered with %s", stateText(st))
	}
	return id
}

// discharge commits (fail false) or rolls back txn and returns the
// endpoint's answer.
func (c *txnConn) discharge(ch uint16, h uint32, txn []byte, fail bool) any {
	return c.outcome(ch, c.transfer(ch, h, nil, valueMessage(described(dDischarge, txn, fail))))
}

// dataMessage is a message of one data section.
func dataMessage(body string) []byte {
	return appendAMQP(nil, amqpDescribed{code: uint64(sData), value: []byte(body)})
}

// valueMessage is a message of one amqp-value section.
func valueMessage(v any) []byte {
	return appendAMQP(nil, amqpDescribed{code: uint64(sValue), value: v})
}

// inTxn is transactional-state{txn, outcome} (outcome nil on transfers).
func inTxn(txn []byte, outcome any) amqpDescribed {
	if outcome == nil {
		return described(dTxnState, txn)
	}
	return described(dTxnState, txn, outcome)
}

// accepted is the accepted outcome.
var accepted = described(dAccepted)

// isAccepted reports whether st is accepted, alone or inside a
// transactional-state.
func isAccepted(st any) bool {
	code, fields := describedCode(st)
	if code == dTxnState {
		code, _ = describedCode(field(fields, 1))
	}
	return code == dAccepted
}

// rejection returns the condition and description of a rejected state
// (alone or inside a transactional-state), ok false for other states.
func rejection(st any) (cond, desc string, ok bool) {
	code, fields := describedCode(st)
	if code == dTxnState {
		code, fields = describedCode(field(fields, 1))
	}
	if code != dRejected {
		return "", "", false
	}
	_, e := describedCode(field(fields, 0))
	sym, _ := field(e, 0).(amqpSymbol)
	d, _ := field(e, 1).(string)
	return string(sym), d, true
}

// stateText describes a delivery state for a failure message.
func stateText(st any) string {
	if cond, desc, ok := rejection(st); ok {
		return fmt.Sprintf("rejected %s %q", cond, desc)
	}
	if isAccepted(st) {
		return "accepted"
	}
	code, fields := describedCode(st)
	return fmt.Sprintf("state 0x%x %v", code, fields)
}

// errorText describes an AMQP error field.
func errorText(v any) string {
	_, e := describedCode(v)
	if e == nil {
		return "no error"
	}
	return fmt.Sprintf("%v: %v", field(e, 0), field(e, 1))
}

// Package txnwire is a minimal AMQP 1.0 client for Service Bus
// transactions, speaking as the .NET SDK does (Microsoft.Azure.Amqp's
// Controller, Azure.Messaging.ServiceBus's AmqpConnectionScope): a
// sender link whose target is a coordinator, declare and discharge as
// amqp-value messages with an 8-byte little-endian counter as delivery
// tag, transactional-state on transfers and dispositions.
//
// go-amqp, which the conformance suite and the bench use otherwise, has
// no transaction coordinator. This client does only what the suite's
// transaction scenarios and the bench's pipeline need: SASL PLAIN,
// sessions, senders (with link properties, for send-via), peek-lock
// receivers with credit, controllers, and one message at a time. A Conn
// is used by one goroutine.
package txnwire

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Options says where and how to connect.
type Options struct {
	Addr     string      // host:port
	TLS      *tls.Config // nil: plain AMQP
	Host     string      // the hostname of open and sasl-init
	User     string      // SASL PLAIN: a key name
	Password string      // its key
}

// Conn is one AMQP connection.
type Conn struct {
	nc       net.Conn
	wmu      sync.Mutex // guards writes to nc
	pending  []frame    // frames read and not yet asked for
	local    map[uint16]uint16
	nextCh   uint16
	handle   uint32
	tag      uint64
	done     chan struct{}
	closeErr sync.Once
}

// frame is one AMQP frame read: its (local) channel, performative code
// and fields, and the payload of a transfer.
type frame struct {
	ch      uint16
	code    uint64
	fields  []any
	payload []byte
}

// Performatives, sections and states used (AMQP 1.0 §2.7, §3.2, §3.4,
// §4.5).
const (
	pOpen, pBegin, pAttach, pFlow, pTransfer, pDisposition, pDetach, pEnd, pClose = 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18
	dAccepted, dRejected                                                          = 0x24, 0x25
	dSource, dTarget, dCoordinator                                                = 0x28, 0x29, 0x30
	dDeclare, dDischarge, dDeclared, dTxnState                                    = 0x31, 0x32, 0x33, 0x34
	sData, sValue                                                                 = 0x75, 0x77
)

func described(code uint64, fields ...any) amqpDescribed {
	if fields == nil {
		fields = []any{}
	}
	return amqpDescribed{code: code, value: fields}
}

// Dial connects and logs in with SASL PLAIN. The connection is closed
// when ctx ends.
func Dial(ctx context.Context, o Options) (*Conn, error) {
	d := &net.Dialer{Timeout: 30 * time.Second}
	var nc net.Conn
	var err error
	if o.TLS != nil {
		nc, err = (&tls.Dialer{NetDialer: d, Config: o.TLS}).DialContext(ctx, "tcp", o.Addr)
	} else {
		nc, err = d.DialContext(ctx, "tcp", o.Addr)
	}
	if err != nil {
		return nil, err
	}
	c := &Conn{nc: nc, local: map[uint16]uint16{}, done: make(chan struct{})}
	go func() {
		select {
		case <-ctx.Done():
			c.Close()
		case <-c.done:
		}
	}()
	if err := c.open(o); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Conn) open(o Options) error {
	if err := c.writeRaw([]byte("AMQP\x03\x01\x00\x00")); err != nil {
		return err
	}
	if err := c.readHeader(); err != nil {
		return err
	}
	if _, err := c.await(func(f frame) bool { return f.code == 0x40 }); err != nil { // sasl-mechanisms
		return err
	}
	if err := c.write(0, 1, described(0x41, amqpSymbol("PLAIN"), []byte("\x00"+o.User+"\x00"+o.Password), o.Host), nil); err != nil {
		return err
	}
	out, err := c.await(func(f frame) bool { return f.code == 0x44 })
	if err != nil {
		return err
	}
	if code, _ := field(out.fields, 0).(uint8); code != 0 {
		return fmt.Errorf("txnwire: SASL PLAIN refused (code %d)", code)
	}
	if err := c.writeRaw([]byte("AMQP\x00\x01\x00\x00")); err != nil {
		return err
	}
	if err := c.readHeader(); err != nil {
		return err
	}
	if err := c.write(0, 0, described(pOpen, "txnwire", o.Host, uint32(1<<20), uint16(255)), nil); err != nil {
		return err
	}
	open, err := c.await(func(f frame) bool { return f.code == pOpen })
	if err != nil {
		return err
	}
	if idle, _ := field(open.fields, 4).(uint32); idle > 0 {
		go c.heartbeat(time.Duration(idle) * time.Millisecond / 2)
	}
	return nil
}

// SetDeadline bounds every read and write from now on.
func (c *Conn) SetDeadline(t time.Time) error { return c.nc.SetDeadline(t) }

// heartbeat writes an empty frame every period until the connection
// closes, as the endpoint's idle timeout asks.
func (c *Conn) heartbeat(period time.Duration) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-tick.C:
			_ = c.writeRaw([]byte{0, 0, 0, 8, 2, 0, 0, 0})
		}
	}
}

// Close closes the connection at once (no close handshake).
func (c *Conn) Close() {
	c.closeErr.Do(func() {
		close(c.done)
		_ = c.nc.Close()
	})
}

func (c *Conn) writeRaw(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.nc.Write(b)
	return err
}

// write sends one frame of type typ (0 AMQP, 1 SASL) on channel ch.
func (c *Conn) write(ch uint16, typ byte, body amqpDescribed, payload []byte) error {
	b := make([]byte, 8, 64+len(payload))
	b = appendAMQP(b, body)
	b = append(b, payload...)
	binary.BigEndian.PutUint32(b, uint32(len(b)))
	b[4], b[5] = 2, typ
	binary.BigEndian.PutUint16(b[6:], ch)
	return c.writeRaw(b)
}

func (c *Conn) readHeader() error {
	var h [8]byte
	_, err := io.ReadFull(c.nc, h[:])
	return err
}

// ErrClosed wraps the error of a close or end the endpoint sent.
var ErrClosed = errors.New("txnwire: the endpoint closed the connection or session")

// read reads the next frame worth keeping: heartbeats and flows (the
// client sends as it goes, and never waits for credit) are dropped.
func (c *Conn) read() (frame, error) {
	for {
		var h [8]byte
		if _, err := io.ReadFull(c.nc, h[:]); err != nil {
			return frame{}, err
		}
		size, doff := binary.BigEndian.Uint32(h[:]), int(h[4])*4
		if size < uint32(doff) || doff < 8 || size > 64<<20 {
			return frame{}, fmt.Errorf("txnwire: a frame of %d bytes (data offset %d)", size, doff)
		}
		b := make([]byte, size-8)
		if _, err := io.ReadFull(c.nc, b); err != nil {
			return frame{}, err
		}
		b = b[doff-8:]
		if len(b) == 0 {
			continue
		}
		v, rest, err := decodeAMQP(b)
		if err != nil {
			return frame{}, err
		}
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
		switch code {
		case pFlow:
			continue
		case pClose, pEnd:
			return frame{}, fmt.Errorf("%w: %s", ErrClosed, errorText(field(fields, 0)))
		}
		return frame{ch: ch, code: code, fields: fields, payload: rest}, nil
	}
}

// await returns the first frame, earlier read or new, that match accepts.
func (c *Conn) await(match func(frame) bool) (frame, error) {
	for i, f := range c.pending {
		if match(f) {
			c.pending = append(c.pending[:i], c.pending[i+1:]...)
			return f, nil
		}
	}
	for {
		f, err := c.read()
		if err != nil {
			return frame{}, err
		}
		if match(f) {
			return f, nil
		}
		c.pending = append(c.pending, f)
	}
}

// errorText describes an AMQP error field.
func errorText(v any) string {
	_, e := describedCode(v)
	if e == nil {
		return "no error"
	}
	return fmt.Sprintf("%v: %v", field(e, 0), field(e, 1))
}

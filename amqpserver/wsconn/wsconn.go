// Package wsconn carries a byte stream, such as AMQP's frames, in the
// binary messages of a WebSocket, as the AMQP WebSocket binding
// (amqp-wsb-v1.0) has it: each write is one binary message, and reads
// join messages into one stream, so a frame may be split across messages
// and a message may hold several frames. The WebSocket framing itself is
// github.com/gorilla/websocket's.
//
// A [Conn] is a net.Conn with that stream: deadlines are the socket's
// (a read that timed out leaves the write side usable, so a server can
// still say why it closes), and a text message is an error of its own,
// [ErrNotBinary], after which Close says "unsupported data" (1003).
package wsconn

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// ErrNotBinary is returned by [Conn.Read] when the peer sent a message
// that is not binary; the stream cannot go on.
var ErrNotBinary = errors.New("wsconn: a WebSocket message that is not binary: the stream travels in binary messages")

// closeWriteTimeout bounds the write of the close message when Close
// finds no write under way; with one under way (a peer that does not
// read), Close does not wait for it and only closes the socket.
const closeWriteTimeout = 100 * time.Millisecond

// Conn is a byte stream over a WebSocket's binary messages. Read must
// not be called concurrently with itself, nor Write with itself; Close
// may be called from any goroutine, at any time, and more than once.
type Conn struct {
	ws *websocket.Conn

	// Owned by the reader.
	cur     io.Reader // the message being read; nil between messages
	readErr error     // sticky: the stream failed (gorilla panics on reads past 1,000 errors)

	writing atomic.Bool  // a Write is under way
	status  atomic.Int32 // close status to send: 0 means StatusNormalClosure

	// The write deadline, kept here because gorilla's is a plain field
	// its writes read: only Write hands it over, while SetWriteDeadline
	// may come from any goroutine (as net.Conn allows).
	wmu       sync.Mutex
	wdeadline time.Time
	once      sync.Once
	err       error // of the first Close
}

// New returns the stream over ws, which the caller hands over: Close
// closes it.
func New(ws *websocket.Conn) *Conn {
	return &Conn{ws: ws}
}

// Subprotocol is the WebSocket subprotocol the connection was opened with.
func (c *Conn) Subprotocol() string { return c.ws.Subprotocol() }

// Read reads from the stream, joining binary messages. The peer's close
// with status 1000 or 1001 reads as io.EOF.
func (c *Conn) Read(p []byte) (int, error) {
	for c.readErr == nil {
		if c.cur == nil {
			typ, r, err := c.ws.NextReader()
			if err != nil {
				c.readErr = readError(err)
				break
			}
			if typ != websocket.BinaryMessage {
				c.status.Store(websocket.CloseUnsupportedData)
				c.readErr = fmt.Errorf("%w (got message type %d)", ErrNotBinary, typ)
				break
			}
			c.cur = r
		}
		n, err := c.cur.Read(p)
		if err == io.EOF {
			c.cur = nil
			if n == 0 {
				continue // an empty message, or the end of one: the next
			}
			err = nil
		}
		if err != nil {
			c.readErr = readError(err)
		}
		return n, err
	}
	return 0, c.readErr
}

// readError turns the peer's orderly close into io.EOF.
func readError(err error) error {
	if websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway) {
		return io.EOF
	}
	return err
}

// Write sends p as one binary message.
func (c *Conn) Write(p []byte) (int, error) {
	c.writing.Store(true)
	defer c.writing.Store(false)
	c.wmu.Lock()
	dl := c.wdeadline
	c.wmu.Unlock()
	c.ws.SetWriteDeadline(dl)
	if err := c.ws.WriteMessage(websocket.BinaryMessage, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Close sends the WebSocket close message, unless a write is stuck, and
// closes the socket. The status is 1000 (normal), or 1003 (unsupported
// data) after a message that was not binary.
func (c *Conn) Close() error {
	c.once.Do(func() {
		if !c.writing.Load() {
			code := int(c.status.Load())
			if code == 0 {
				code = websocket.CloseNormalClosure
			}
			_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, ""), time.Now().Add(closeWriteTimeout))
		}
		c.err = c.ws.Close()
	})
	return c.err
}

// LocalAddr is the socket's local address.
func (c *Conn) LocalAddr() net.Addr { return c.ws.LocalAddr() }

// RemoteAddr is the socket's remote address.
func (c *Conn) RemoteAddr() net.Addr { return c.ws.RemoteAddr() }

// SetDeadline sets the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	return errors.Join(c.SetReadDeadline(t), c.SetWriteDeadline(t))
}

// SetReadDeadline sets the socket's read deadline. A read that times
// out ends the stream's reading; writing goes on.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.ws.SetReadDeadline(t) }

// SetWriteDeadline sets the deadline of writes, the one under way
// included. It may be called while another goroutine writes.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.wmu.Lock()
	c.wdeadline = t
	c.wmu.Unlock()
	return c.ws.UnderlyingConn().SetWriteDeadline(t) // reaches a write under way
}

var _ net.Conn = (*Conn)(nil)

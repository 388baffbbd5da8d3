package amqpserver

import (
	"errors"
	"net"
	"time"

	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
)

// A clean shutdown answers every transfer the server already took
// (Server.Shutdown): each connection stops reading, handles the frames it
// had read, lets every send and settlement whose answer the peer is owed
// reach the broker and writes those answers (owed.go), and only then
// closes with amqp:connection:forced. A client is therefore never left
// without the answer to a send that was stored, which it would retry and
// duplicate. If Shutdown's context ends first, the remaining connections
// are closed at once.

// errReadStopped ends readLoop when the connection drains.
var errReadStopped = errors.New("amqpserver: reading stopped for shutdown")

// startDrain stops the reader: the frame it is reading (if any) is cut
// short and no other is read. run learns it has stopped from readErr.
func (c *conn) startDrain() {
	c.draining = true
	c.stopRead.Store(true)
	// readLoop checks stopRead after setting its own deadline, so either
	// it sees the flag or this deadline overrides its own.
	c.nc.SetReadDeadline(time.Unix(1, 0))
}

// readStopped reports whether err is readLoop stopping for a drain.
func (c *conn) readStopped(err error) bool {
	if !c.draining {
		return false
	}
	var ne net.Error
	return errors.Is(err, errReadStopped) || errors.As(err, &ne) && ne.Timeout()
}

// finishDrain runs once the reader has stopped, having handled the
// frames it had read: what they asked of the broker is submitted, and the close
// is written once every answer owed is.
func (c *conn) finishDrain() error {
	c.submitPending()
	c.afterOwed(func() {
		if c.closed {
			return
		}
		// Acknowledgements queued in this pass go before the close
		// (afterOwed wrote them), or the peer, which stops reading at
		// the close, would miss them.
		c.write(0, &frames.Close{Error: errorf(frames.CondConnectionForced, "The server is shutting down.")})
		c.closed = true
	})
	return nil
}

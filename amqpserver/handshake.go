package amqpserver

import (
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
)

// stateFunc is one step of the connection handshake; it returns the next
// step, nil when the connection is open.
type stateFunc func() (stateFunc, error)

// handshake negotiates the protocol layers and exchanges open frames
// (AMQP 1.0 §2.2, §2.4.1; part 5 §5.3):
//
//	client: AMQP 3 1 0 0           server: AMQP 3 1 0 0, sasl-mechanisms
//	client: sasl-init              server: sasl-outcome
//	client: AMQP 0 1 0 0           server: AMQP 0 1 0 0
//	client: open                   server: open
//
// A client that starts with the AMQP header (no SASL) is accepted only
// when the server has no validator (authentication disabled). Otherwise
// it gets the SASL header back and the socket is closed, which is how
// §2.2 says a server refuses a protocol it will not speak; the same goes
// for TLS or unknown headers.
func (c *conn) handshake() error {
	for st := c.stateProtocolHeader; st != nil; {
		var err error
		if st, err = st(); err != nil {
			return err
		}
	}
	return nil
}

// stateProtocolHeader reads the first protocol header.
func (c *conn) stateProtocolHeader() (stateFunc, error) {
	h, err := c.rd.ReadProtocolHeader()
	if err != nil {
		return nil, err
	}
	switch {
	case h == frames.SASLHeader:
		var b buffer.Buffer
		frames.WriteProtocolHeader(&b, frames.SASLHeader)
		if err := frames.Write(&b, frames.Frame{Body: &frames.SASLMechanisms{Mechanisms: saslMechanisms}}); err != nil {
			return nil, err
		}
		if _, err := c.nc.Write(b.Bytes()); err != nil {
			return nil, err
		}
		return c.stateSASLInit, nil
	case h == frames.AMQPHeader && c.srv.authOff:
		c.auth.allowAll()
		c.credentialAccepted()
		return c.stateReplyAMQPHeader, nil
	}
	c.writeHeader(frames.SASLHeader)
	return nil, fmt.Errorf("amqpserver: refused protocol header %v", h)
}

// stateSASLInit reads sasl-init, authenticates and sends the outcome.
func (c *conn) stateSASLInit() (stateFunc, error) {
	fr, err := c.rd.ReadFrame()
	if err != nil {
		return nil, err
	}
	init, ok := fr.Body.(*frames.SASLInit)
	if !ok {
		c.writeNow(&frames.SASLOutcome{Code: frames.SASLSysPerm})
		return nil, fmt.Errorf("amqpserver: %T where sasl-init was expected", fr.Body)
	}
	if err := c.authenticate(init); err != nil {
		c.log.Info("SASL authentication failed", zap.String("mechanism", string(init.Mechanism)), zap.Error(err))
		code := frames.SASLAuth
		if errors.Is(err, core.ErrServerBusy) {
			// The key could not be checked now (a cluster's group
			// holding it has no reachable leader): transient, not bad
			// credentials.
			code = frames.SASLSysTemp
		}
		c.writeNow(&frames.SASLOutcome{Code: code})
		return nil, err
	}
	if c.authenticated() {
		c.credentialAccepted()
	}
	if err := c.writeNow(&frames.SASLOutcome{Code: frames.SASLOK}); err != nil {
		return nil, err
	}
	return c.stateAMQPHeader, nil
}

// stateAMQPHeader reads the AMQP header that follows a SASL outcome.
func (c *conn) stateAMQPHeader() (stateFunc, error) {
	h, err := c.rd.ReadProtocolHeader()
	if err != nil {
		return nil, err
	}
	if h != frames.AMQPHeader {
		c.writeHeader(frames.AMQPHeader)
		return nil, fmt.Errorf("amqpserver: %v after SASL, want %v", h, frames.AMQPHeader)
	}
	return c.stateReplyAMQPHeader, nil
}

func (c *conn) stateReplyAMQPHeader() (stateFunc, error) {
	if err := c.writeHeader(frames.AMQPHeader); err != nil {
		return nil, err
	}
	return c.stateOpen, nil
}

// stateOpen reads the peer's open and answers with ours.
func (c *conn) stateOpen() (stateFunc, error) {
	fr, err := c.rd.ReadFrame()
	if err != nil {
		// An open that cannot be read still gets our open, then the
		// close that says why, as any later frame would.
		if cond := unreadableFrame(err); cond != "" {
			c.writeNow(c.ourOpen())
			c.writeNow(&frames.Close{Error: errorf(cond, "%v", err)})
		}
		return nil, err
	}
	open, ok := fr.Body.(*frames.Open)
	if !ok || fr.Type != frames.TypeAMQP {
		c.writeNow(c.ourOpen())
		c.writeNow(&frames.Close{Error: errorf(frames.CondNotAllowed, "expected open, got %T", fr.Body)})
		return nil, fmt.Errorf("amqpserver: %T where open was expected", fr.Body)
	}
	err = c.transportHosts()
	if err == nil {
		err = c.bindHost(open.Hostname, "the open's hostname")
	}
	if err == nil {
		err = c.settlePlainLogin()
	}
	if err != nil {
		c.writeNow(c.ourOpen())
		c.writeNow(&frames.Close{Error: errorf(frames.CondUnauthorizedAccess, "%v", err)})
		return nil, fmt.Errorf("amqpserver: refused the open: %w", err)
	}
	c.peerMaxFrame = open.MaxFrameSize
	c.containerID = open.ContainerID
	c.jmsProvider = jmsProviderOf(open.Properties)
	c.channelMax = min(open.ChannelMax, c.srv.cfg.Limits.channelMax())
	c.peerIdle = time.Duration(open.IdleTimeOut) * time.Millisecond
	// Counted as open before the peer sees our open, so that Shutdown
	// either drains the connection or closes it before it is open.
	if e := c.srv.opened(c); e != nil {
		c.writeNow(c.ourOpen())
		c.writeNow(&frames.Close{Error: e})
		return nil, fmt.Errorf("amqpserver: refused after open: %v", e)
	}
	if err := c.writeNow(c.ourOpen()); err != nil {
		return nil, err
	}
	if c.peerMaxFrame < frames.MinMaxFrameSize {
		c.writeNow(&frames.Close{Error: errorf(frames.CondFrameSizeTooSmall,
			"max-frame-size %d is below the minimum of %d", c.peerMaxFrame, frames.MinMaxFrameSize)})
		return nil, fmt.Errorf("amqpserver: peer max-frame-size %d", c.peerMaxFrame)
	}
	// A peer idle timeout below a second would make us spin on heartbeats.
	if c.peerIdle > 0 && c.peerIdle < time.Second {
		c.peerIdle = time.Second
	}
	c.log.Debug("connection open", zap.String("container", open.ContainerID), zap.String("hostname", open.Hostname),
		zap.Uint32("max-frame", open.MaxFrameSize), zap.Duration("idle", c.peerIdle))
	return nil, nil
}

// unreadableFrame returns the condition that closes a connection whose
// frame failed to read with err, or "" when err is the socket's.
func unreadableFrame(err error) encoding.Symbol {
	switch {
	case errors.Is(err, frames.ErrFrameTooLarge):
		return frames.CondFrameSizeTooSmall
	case errors.Is(err, frames.ErrFrameTooSmall), errors.Is(err, frames.ErrMalformed):
		return frames.CondDecodeError
	}
	return ""
}

func (c *conn) ourOpen() *frames.Open {
	return &frames.Open{
		ContainerID:  "omnibus-" + c.srv.host(),
		MaxFrameSize: c.srv.cfg.MaxFrameSize,
		ChannelMax:   c.srv.cfg.Limits.channelMax(),
		IdleTimeOut:  uint32(c.srv.cfg.IdleTimeout / time.Millisecond),
		// Qpid JMS refuses shared subscriptions unless offered (jms.go).
		OfferedCapabilities: []encoding.Symbol{capSharedSubs},
	}
}

func (c *conn) writeHeader(h frames.ProtocolHeader) error {
	b := h.Bytes()
	_, err := c.nc.Write(b[:])
	return err
}

package amqpserver

import (
	"errors"
	"io"
	"net"
	"time"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
)

// Refusing a peer: it gets just enough of the handshake to read why
// (SASL accepted without looking, our open, then a close carrying the
// reason), within refuseTimeout, and is disconnected. At most maxRefusing
// refusals are answered at once; beyond that a refused socket is closed
// without a word, so a flood costs a bounded number of goroutines.
const (
	maxRefusing   = 64
	refuseTimeout = 5 * time.Second
)

// admit decides what becomes of an accepted socket: a connection served
// in its own goroutine, or a refusal (Config.Admit said no, or
// MaxConnections or MaxPendingConnections is reached). It reports false
// when the server is shutting down.
func (s *Server) admit(nc net.Conn) bool {
	if f := s.cfg.Admit; f != nil {
		if err := f(nc.RemoteAddr()); err != nil {
			s.log.Debug("connection refused by the admission policy", zap.Stringer("remote", nc.RemoteAddr()), zap.Error(err))
			s.refuse(nc, errorf(frames.CondUnauthorizedAccess, "%v", err))
			return true
		}
	}
	c := newConn(s, nc)
	s.mu.Lock()
	var refusal *frames.Error
	switch {
	case s.mu.closed:
		s.mu.Unlock()
		nc.Close()
		return false
	case s.cfg.MaxConnections > 0 && s.mu.open >= s.cfg.MaxConnections:
		refusal = s.tooManyConnections()
	case s.cfg.MaxPendingConnections > 0 && s.mu.pending >= s.cfg.MaxPendingConnections:
		refusal = errorf(frames.CondResourceLimitExceeded,
			"The server is busy: %d connections are already being opened. Retry later.", s.cfg.MaxPendingConnections)
	default:
		s.mu.conns[c] = struct{}{}
		s.mu.pending++
		// Counted under s.mu, before Shutdown (which marks the server
		// closed under s.mu, then waits) can begin to wait: an Add racing
		// a Wait that has begun is a misuse of the WaitGroup.
		s.wg.Add(1)
	}
	s.mu.Unlock()
	if refusal != nil {
		s.logRefusal(nc, refusal)
		s.refuse(nc, refusal)
		return true
	}
	go func() {
		defer s.wg.Done()
		defer s.untrack(c)
		c.serve(s.ctx)
	}()
	return true
}

func (s *Server) tooManyConnections() *frames.Error {
	return errorf(frames.CondResourceLimitExceeded,
		"The namespace's limit of %d concurrent connections is reached.", s.cfg.MaxConnections)
}

// opened moves c from the handshake to the open connections, unless that
// would exceed MaxConnections (other handshakes finished first), its
// namespace's MaxConnections (when the handshake bound it to one) or the
// server is shutting down: then it returns the error to close c with.
func (s *Server) opened(c *conn) *frames.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return errorf(frames.CondConnectionForced, "The server is shutting down.")
	}
	if s.cfg.MaxConnections > 0 && s.mu.open >= s.cfg.MaxConnections {
		return s.tooManyConnections()
	}
	if c.nsBound {
		if e := s.countInNamespaceLocked(c, c.namespace()); e != nil {
			return e
		}
	}
	s.mu.pending--
	s.mu.open++
	c.opened = true
	s.stats.opened.Add(1)
	return nil
}

// untrack forgets c once it has ended.
func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mu.conns, c)
	s.uncountLocked(c)
	if c.opened {
		s.mu.open--
		s.stats.closed.Add(1)
	} else {
		s.mu.pending--
	}
}

// logRefusal warns about refusals for capacity, at most once per
// acceptLogEvery with the number refused since.
func (s *Server) logRefusal(nc net.Conn, e *frames.Error) {
	s.mu.Lock()
	s.mu.refused++
	n := s.mu.refused
	now := time.Now()
	logNow := now.Sub(s.mu.refusedLog) >= acceptLogEvery
	if logNow {
		s.mu.refused, s.mu.refusedLog = 0, now
	}
	s.mu.Unlock()
	if logNow {
		s.log.Warn("refusing AMQP connections", zap.Stringer("remote", nc.RemoteAddr()),
			zap.String("reason", e.Description), zap.Int("refused", n))
	} else {
		s.log.Debug("connection refused", zap.Stringer("remote", nc.RemoteAddr()), zap.String("reason", e.Description))
	}
}

// refuse answers a refused peer in its own goroutine, if fewer than
// maxRefusing are being answered, and closes the socket.
func (s *Server) refuse(nc net.Conn, e *frames.Error) {
	s.mu.Lock()
	answer := !s.mu.closed && len(s.mu.refusing) < maxRefusing
	if answer {
		s.mu.refusing[nc] = struct{}{}
		s.wg.Add(1) // under s.mu, as admit's
	}
	s.mu.Unlock()
	if !answer {
		nc.Close()
		return
	}
	go func() {
		defer s.wg.Done()
		defer func() {
			s.mu.Lock()
			delete(s.mu.refusing, nc)
			s.mu.Unlock()
		}()
		defer nc.Close()
		if err := s.answerRefusal(nc, e); err != nil && !errors.Is(err, io.EOF) {
			s.log.Debug("answering a refused connection", zap.Stringer("remote", nc.RemoteAddr()), zap.Error(err))
		}
	}()
}

// answerRefusal runs the handshake far enough to tell the peer e: SASL
// (any mechanism succeeds: nothing is authorized) or a bare AMQP header,
// the peer's open answered with ours and a close carrying e. It then
// waits briefly for the peer's close, so the close is read before the
// socket goes away.
func (s *Server) answerRefusal(nc net.Conn, e *frames.Error) error {
	nc.SetDeadline(time.Now().Add(refuseTimeout))
	rd := frames.NewReader(nc, s.cfg.PreAuthMaxFrameSize)
	var out buffer.Buffer
	send := func(bodies ...frames.Body) error {
		out.Reset()
		for _, b := range bodies {
			if err := frames.Write(&out, frames.Frame{Body: b}); err != nil {
				return err
			}
		}
		_, err := nc.Write(out.Bytes())
		return err
	}
	writeHeader := func(h frames.ProtocolHeader) error {
		b := h.Bytes()
		_, err := nc.Write(b[:])
		return err
	}
	h, err := rd.ReadProtocolHeader()
	if err != nil {
		return err
	}
	if h == frames.SASLHeader {
		if err := writeHeader(frames.SASLHeader); err != nil {
			return err
		}
		if err := send(&frames.SASLMechanisms{Mechanisms: saslMechanisms}); err != nil {
			return err
		}
		if _, err := rd.ReadFrame(); err != nil {
			return err
		}
		if err := send(&frames.SASLOutcome{Code: frames.SASLOK}); err != nil {
			return err
		}
		if h, err = rd.ReadProtocolHeader(); err != nil {
			return err
		}
	}
	if h != frames.AMQPHeader {
		return writeHeader(frames.SASLHeader)
	}
	if err := writeHeader(frames.AMQPHeader); err != nil {
		return err
	}
	if _, err := rd.ReadFrame(); err != nil {
		return err
	}
	open := &frames.Open{ContainerID: "omnibus-" + s.host(), MaxFrameSize: s.cfg.PreAuthMaxFrameSize}
	if err := send(open, &frames.Close{Error: e}); err != nil {
		return err
	}
	nc.SetDeadline(time.Now().Add(time.Second))
	for {
		fr, err := rd.ReadFrame()
		if err != nil {
			return err
		}
		if _, ok := fr.Body.(*frames.Close); ok {
			return nil
		}
	}
}

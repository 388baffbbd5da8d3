package amqpserver

import (
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
)

// sessionWindow is the incoming and outgoing window the server
// advertises, in transfer frames. The incoming window is topped up with a
// flow whenever half of it is used.
const sessionWindow = 8192

// session is one AMQP session (§2.5). Owned by the connection goroutine.
type session struct {
	c        *conn
	ch       uint16 // our channel (equal to the peer's: channel numbers are per endpoint)
	remoteCh uint16

	// Incoming transfer accounting (§2.5.6).
	nextIncomingID uint32
	incomingWindow uint32 // remaining before we must send a flow

	// Outgoing transfer accounting (outqueue.go).
	nextOutgoingID       uint32
	remoteIncomingWindow uint32 // transfer frames the peer takes before its next flow
	peerWindow           uint32 // the incoming-window of the peer's last begin or flow
	nextDeliveryID       uint32
	out                  []*outTransfer // deliveries being written, in order
	outRoom              []*outTransfer // the array out was last grown into, reused once out is empty
	outFrames            uint32         // frames of out still to write
	reserved             uint32         // window frames reserved for receive-and-delete removals
	stalled              bool           // on conn.stalled, waiting for the writer
	starved              bool           // on conn.starved, its incoming window waiting for the incoming buffer
	windowWaiters        []*link        // links waiting for window room (outgoing.go)

	// A session whose first link is a coordinator groups a transaction's
	// work across entities (txn.go): viaEntity is the top-level entity of
	// its first entity link, txnGroup whether a coordinator came first.
	txnGroup  bool
	viaEntity string

	ending bool             // we sent end; waiting for the peer's
	links  map[uint32]*link // by the peer's handle; our handle is the same number
	// awaiting holds the handles of links we detached (or refused) first:
	// the link is gone, but its handle stays in use until the peer's
	// detach answers ours (§2.6.5). Frames for them are dropped.
	awaiting map[uint32]struct{}
	acks     [2][]uint32 // accepted deliveries to acknowledge at the next flush, by role (see queueAck)
	// unsettled holds deliveries sent in peek-lock mode, by delivery-id,
	// until the client settles them.
	unsettled map[uint32]*outDelivery

	// tx, txID and txFormat are the transfer writeFrame encodes (run's).
	tx       frames.Transfer
	txID     uint32
	txFormat uint32
}

// handleBegin opens a session on channel ch.
func (c *conn) handleBegin(ch uint16, b *frames.Begin) error {
	if c.closing {
		return nil
	}
	if b.RemoteChannel != nil {
		return closeWith(frames.CondNotAllowed, "begin with remote-channel: the server never begins sessions")
	}
	if ch > c.channelMax {
		// §2.4.1: a channel outside the range we can handle closes the
		// connection with framing-error.
		return closeWith(frames.CondFramingError, "channel %d above channel-max %d", ch, c.channelMax)
	}
	if c.sessions[ch] != nil {
		return closeWith(frames.CondNotAllowed, "channel %d already has a session", ch)
	}
	if err := c.admitSession(); err != nil {
		return err
	}
	s := &session{
		c:                    c,
		ch:                   ch,
		remoteCh:             ch,
		nextIncomingID:       b.NextOutgoingID,
		incomingWindow:       max(1, c.windowTarget()),
		remoteIncomingWindow: b.IncomingWindow,
		peerWindow:           b.IncomingWindow,
		links:                make(map[uint32]*link),
		unsettled:            make(map[uint32]*outDelivery),
	}
	c.sessions[ch] = s
	c.local[ch] = s
	remote := ch
	c.write(s.ch, &frames.Begin{
		RemoteChannel:  &remote,
		NextOutgoingID: s.nextOutgoingID,
		IncomingWindow: s.incomingWindow,
		OutgoingWindow: sessionWindow,
		HandleMax:      c.srv.cfg.Limits.handleMax(),
	})
	return nil
}

// handle dispatches a frame received on the session's channel.
func (s *session) handle(body frames.Body) error {
	if s.ending {
		// We ended the session; frames already in flight are dropped
		// until the peer's end frees the channel.
		if _, ok := body.(*frames.End); ok {
			s.forget()
		}
		return nil
	}
	switch b := body.(type) {
	case *frames.Attach:
		return s.handleAttach(b)
	case *frames.Flow:
		return s.handleFlow(b)
	case *frames.Transfer:
		return s.handleTransfer(b)
	case *frames.Disposition:
		s.handleDisposition(b)
		return nil
	case *frames.Detach:
		return s.handleDetach(b)
	case *frames.End:
		// The channel stays ours until the settlements sent before the
		// end are applied and we answer (owed.go).
		s.release()
		s.ending = true
		s.c.afterOwed(func() {
			s.forget()
			s.c.write(s.ch, &frames.End{})
		})
		return nil
	}
	return closeWith(frames.CondNotAllowed, "unexpected %T on a session", body)
}

// end ends the session from our side with e: its links are released and
// the channel stays reserved until the peer answers with its own end.
func (s *session) end(e *frames.Error) {
	s.release()
	s.ending = true
	s.c.write(s.ch, &frames.End{Error: e})
}

// forget frees the session's channel.
func (s *session) forget() {
	delete(s.c.sessions, s.remoteCh)
	delete(s.c.local, s.ch)
}

// release stops every link of the session and frees their handles.
func (s *session) release() {
	for _, l := range s.links {
		l.release()
	}
	s.c.links -= len(s.links) + len(s.awaiting)
	s.links = map[uint32]*link{}
	s.awaiting = nil
	s.unsettled = map[uint32]*outDelivery{}
}

// addLink makes l the link on its handle.
func (s *session) addLink(l *link) {
	s.links[l.handle] = l
	s.c.links++
}

// handleInUse reports whether handle h is attached or awaits the peer's
// detach.
func (s *session) handleInUse(h uint32) bool {
	_, awaiting := s.awaiting[h]
	return awaiting || s.links[h] != nil
}

// forgetLink frees the link on handle h once we detached it first: its
// state goes now, its handle when the peer's detach arrives.
func (s *session) forgetLink(h uint32) {
	if s.links[h] == nil {
		return
	}
	delete(s.links, h)
	if s.awaiting == nil {
		s.awaiting = make(map[uint32]struct{})
	}
	s.awaiting[h] = struct{}{}
}

// live reports whether s is still the session on its channel and not
// ending.
func (s *session) live() bool { return s.c.local[s.ch] == s && !s.ending }

// handleFlow applies a session flow and, if it names a link, a link flow.
func (s *session) handleFlow(f *frames.Flow) error {
	next := uint32(0)
	if f.NextIncomingID != nil {
		next = *f.NextIncomingID
	}
	// §2.5.6: remote-incoming-window = next-incoming-id(flow) +
	// incoming-window(flow) - next-outgoing-id(endpoint). It is the same
	// serial-number sum as link credit: a flow that has not seen more of
	// our transfers than its window leaves nothing.
	s.remoteIncomingWindow = linkCredit(next, f.IncomingWindow, s.nextOutgoingID)
	s.peerWindow = f.IncomingWindow
	s.pump()
	s.wakeRoom()
	if f.Handle == nil {
		if f.Echo {
			s.c.write(s.ch, s.flow())
		}
		return nil
	}
	l := s.links[*f.Handle]
	if l == nil {
		if _, ok := s.awaiting[*f.Handle]; !ok {
			s.end(errorf(frames.CondUnattachedHandle, "flow for unattached handle %d", *f.Handle))
		}
		return nil
	}
	l.handleFlow(f)
	return nil
}

// flow returns a session-level flow with the current windows.
func (s *session) flow() *frames.Flow {
	next := s.nextIncomingID
	return &frames.Flow{
		NextIncomingID: &next,
		IncomingWindow: s.incomingWindow,
		NextOutgoingID: s.nextOutgoingID,
		OutgoingWindow: sessionWindow,
	}
}

// received accounts for one incoming transfer frame, topping up the
// incoming window with a flow when half of it is used. A transfer beyond
// the window we gave ends the session with window-violation (§2.5.6).
func (s *session) received() bool {
	if s.incomingWindow == 0 {
		s.end(errorf(frames.CondWindowViolation, "transfer beyond the session's incoming-window"))
		return false
	}
	s.nextIncomingID++
	s.incomingWindow--
	if s.incomingWindow <= sessionWindow/2 {
		s.topUpWindow()
	}
	return true
}

// topUpWindow reopens the incoming window, once half of it is used, as
// far as the connection's incoming buffer allows (Limits.MaxIncomingBuffer):
// the window is in frames, so it is what is left of the buffer in frames
// of our max-frame-size, at most sessionWindow. A session whose window
// cannot grow now waits on conn.starved for the buffer to drain.
func (s *session) topUpWindow() {
	c := s.c
	w := c.windowTarget()
	if s.incomingWindow > w/2 {
		return // enough left
	}
	if w <= s.incomingWindow {
		if !s.starved {
			s.starved = true
			c.starved = append(c.starved, s)
		}
		if c.memoryBound() {
			c.waitForMemory()
		}
		return
	}
	s.incomingWindow = w
	c.write(s.ch, s.flow())
}

// windowTarget is the incoming window a session may have now: what is
// left of the connection's incoming buffer and of the memory budget, in
// frames of our max-frame-size, at most sessionWindow. A connection that
// holds nothing may always take minIncomingFrames of the budget, so that
// it makes progress, slowly, while others hold it.
func (c *conn) windowTarget() uint32 {
	frame := int64(c.srv.cfg.MaxFrameSize)
	global := c.srv.cfg.Memory.Available()
	if c.inBytes == 0 {
		global = max(global, minIncomingFrames*frame)
	}
	room := min(int64(c.srv.cfg.Limits.MaxIncomingBuffer-c.inBytes), global)
	return uint32(min(int64(sessionWindow), max(0, room)/frame))
}

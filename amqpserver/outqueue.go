package amqpserver

import (
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
)

// Outgoing transfers (server to client) obey two bounds. The client's
// session incoming-window (§2.5.6) says how many transfer frames it will
// take: a message is taken from its entity only when the window has room
// for all of its frames (outgoing.go), so the window never holds back a
// message we have locked or removed. And our own output: a session's
// deliveries are written frame by frame only while the bytes waiting for
// the socket stay under maxDeliveryOutput; the rest waits here, in order, and is
// written as the socket drains (conn.unstall).

// transferOverhead is room for the frame header and the transfer
// performative (at most about 80 bytes with a 32-byte tag).
const transferOverhead = 128

// outTransfer is a delivery whose transfer frames are being written.
type outTransfer struct {
	l       *link
	id      uint32
	tag     []byte
	settled bool
	payload payload
	sent    int    // bytes of payload written
	frames  uint32 // frames left to write
	// od is the unsettled entry of a peek-locked delivery, nil for a
	// settled one.
	od *outDelivery
	// reply is set on $cbs and $management replies.
	reply bool
}

// payload is an outgoing delivery's bytes in two pieces, written one
// after the other: the message's sections as encoded for this delivery,
// and its body as the broker holds it (shared with the broker, never
// written to). A body is so copied once, into the transfer frames that
// carry it, rather than first into an encoded message and then into the
// frames (a 64 KiB delivery's second copy and allocation).
type payload struct {
	head, body []byte
}

// len is the size of the payload in bytes.
func (p payload) len() int { return len(p.head) + len(p.body) }

// slice returns bytes [from, to) of p, in at most two pieces.
func (p payload) slice(from, to int) (a, b []byte) {
	h := len(p.head)
	if from < h {
		a = p.head[from:min(to, h)]
	}
	if to > h {
		b = p.body[max(from, h)-h : to-h]
	}
	return a, b
}

// chunk is the payload that fits one transfer frame to the peer.
func (c *conn) chunk() int {
	return int(min(c.peerMaxFrame, 1<<20)) - transferOverhead
}

// framesFor is the number of transfer frames a payload of n bytes needs.
func (c *conn) framesFor(n int) uint32 {
	ch := c.chunk()
	return uint32(max(1, (n+ch-1)/ch))
}

// windowFree is how many more transfer frames the session may commit to:
// the client's remaining incoming window less the frames already queued
// or reserved.
func (s *session) windowFree() uint32 {
	used := uint64(s.outFrames) + uint64(s.reserved)
	if uint64(s.remoteIncomingWindow) <= used {
		return 0
	}
	return s.remoteIncomingWindow - uint32(used)
}

// fits reports whether a delivery of n frames may be taken now: the
// window has room for all of it, or it is larger than any window the
// client has offered and the session has nothing else to send, so it
// goes out as the window opens.
func (s *session) fits(n uint32) bool {
	free := s.windowFree()
	if n <= free {
		return true
	}
	return free > 0 && n > s.peerWindow && s.outFrames == 0 && s.reserved == 0
}

// queueTransfer queues d for writing and writes what it can now.
func (s *session) queueTransfer(d *outTransfer) {
	d.frames = s.c.framesFor(d.payload.len())
	s.outFrames += d.frames
	s.c.holdOut(d.payload.len())
	if len(s.out) == cap(s.out) {
		// append moves out to a new array: remember it, so that the
		// queue reuses it once drained rather than allocating an array
		// for each delivery (which is written at once, most of the time).
		s.out = append(s.out, d)
		s.outRoom = s.out[:0]
	} else {
		s.out = append(s.out, d)
	}
	if len(s.out) == 1 {
		s.pump()
	}
}

// pump writes queued transfer frames, in order, while the client's window
// and our output allow. A session stopped by our output is resumed when
// the writer drains (conn.unstall).
func (s *session) pump() {
	c := s.c
	for len(s.out) > 0 && s.remoteIncomingWindow > 0 {
		if c.outputFull() {
			c.stall(s)
			return
		}
		d := s.out[0]
		s.writeFrame(d)
		if d.frames == 0 {
			d.payload = payload{} // written: a peek-locked delivery's entry keeps d until settled
			s.out[0] = nil
			s.out = s.out[1:]
			if d.reply {
				d.l.out.replyBacklog--
			}
		}
	}
	if len(s.out) == 0 {
		s.out = s.outRoom[:0] // every slot was cleared as it was written
	}
	s.c.wakeBuffer()
}

// writeFrame writes the next transfer frame of d.
func (s *session) writeFrame(d *outTransfer) {
	c := s.c
	n := min(d.payload.len()-d.sent, c.chunk())
	head, body := d.payload.slice(d.sent, d.sent+n)
	// The session's own Transfer, and its id and format: c.write encodes
	// the frame at once and keeps none of them (three allocations a frame
	// before).
	t := &s.tx
	*t = frames.Transfer{Handle: d.l.handle, Settled: d.settled, More: d.frames > 1,
		Payload: head, PayloadRest: body}
	if d.sent == 0 {
		s.txID, s.txFormat = d.id, 0
		t.DeliveryID, t.DeliveryTag, t.MessageFormat = &s.txID, d.tag, &s.txFormat
	}
	c.write(s.ch, t)
	*t = frames.Transfer{} // holds no payload until the next frame
	d.sent += n
	d.frames--
	c.holdOut(-n)
	s.outFrames--
	s.nextOutgoingID++
	s.remoteIncomingWindow--
}

// purge drops the deliveries of l (which is going away) not yet written
// whole. A peek-locked message the client did not get whole is released
// (no delivery counted): it never reached the client.
func (s *session) purge(l *link) {
	kept := s.out[:0]
	var release []*outDelivery
	for _, d := range s.out {
		if d.l != l {
			kept = append(kept, d)
			continue
		}
		s.outFrames -= d.frames
		s.c.holdOut(-(d.payload.len() - d.sent))
		if d.od != nil {
			delete(s.unsettled, d.id)
			l.out.unsettled--
			release = append(release, d.od)
		}
	}
	clear(s.out[len(kept):])
	s.out = kept
	for _, od := range release {
		s.c.giveBackTokens(od.entity, od.token)
	}
	s.wakeRoom()
}

// wakeRoom lets the links waiting for window or buffer room pull again.
func (s *session) wakeRoom() {
	if len(s.windowWaiters) > 0 && s.windowFree() > 0 {
		wakeWaiters(&s.windowWaiters)
	}
	s.c.wakeBuffer()
}

// wakeBuffer lets the links waiting for delivery-buffer room pull again
// once there is some.
func (c *conn) wakeBuffer() {
	if len(c.bufferWaiters) > 0 && c.outBytes < c.srv.cfg.Limits.MaxDeliveryBuffer {
		wakeWaiters(&c.bufferWaiters)
	}
}

// maxDeliveryOutput is how many bytes may wait for the socket before
// transfers stop being written: half of maxOutbox, so the frames that are
// not transfers (dispositions, flows, heartbeats) always find room and
// never make the connection goroutine wait for a client that is slow to
// read (writer.go, enqueue).
const maxDeliveryOutput = maxOutbox / 2

// outputFull reports whether the bytes waiting for the socket have
// reached maxDeliveryOutput.
func (c *conn) outputFull() bool {
	return int64(c.pending.Len())+c.ob.size.Load() >= maxDeliveryOutput
}

// stall records that s waits for the writer to drain.
func (c *conn) stall(s *session) {
	if !s.stalled {
		s.stalled = true
		c.stalled = append(c.stalled, s)
	}
}

// unstall resumes the sessions the output held back, in order.
func (c *conn) unstall() {
	ss := c.stalled
	c.stalled = nil
	for i, s := range ss {
		ss[i] = nil
		s.stalled = false
		if s.live() {
			s.pump()
		}
	}
}

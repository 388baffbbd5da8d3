package amqpserver

import (
	"testing"

	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
)

// transferFrame is frame i of a delivery (id) on handle h.
func transferFrame(h, id uint32, first, more bool, payload []byte) *frames.Transfer {
	t := &frames.Transfer{Handle: h, More: more, Payload: payload}
	if first {
		format := uint32(0)
		t.DeliveryID, t.DeliveryTag, t.MessageFormat = &id, []byte{byte(id)}, &format
	}
	return t
}

// TestOversizeRefusedEarly sends a delivery far larger than a 256 KiB
// queue takes: it is rejected with amqp:link:message-size-exceeded as soon
// as its frames pass the limit, before its last frame; the rest is read
// and dropped, and the link goes on taking messages.
func TestOversizeRefusedEarly(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "small", MaxMessageSizeInKilobytes: 256})
	p := ts.rawDial(t)
	p.open()
	p.writeFrame(0, beginFrame())
	p.readFrame()
	p.writeFrame(0, senderAttach("small"))
	p.readFrame() // attach
	p.readFrame() // flow
	chunk := make([]byte, 60<<10)
	for i := range 5 { // 300 KiB: over the limit, not finished
		p.writeFrame(0, transferFrame(0, 0, i == 0, true, chunk))
	}
	d, ok := p.readFrame().(*frames.Disposition)
	if !ok {
		t.Fatalf("got %T before the delivery's last frame, want its rejection", d)
	}
	if rej, ok := d.State.(*frames.Rejected); !ok || rej.Error == nil || rej.Error.Condition != frames.CondMessageSizeExceeded {
		t.Fatalf("state %+v, want rejected with amqp:link:message-size-exceeded", d.State)
	}
	for i := range 20 { // the rest of a larger delivery, dropped as it comes
		p.writeFrame(0, transferFrame(0, 0, false, i < 19, chunk))
	}
	p.writeFrame(0, transferFrame(0, 1, true, false, dataSection(t, 100)))
	for {
		if d, ok := p.readFrame().(*frames.Disposition); ok {
			if _, ok := d.State.(*frames.Accepted); !ok || d.First != 1 {
				t.Fatalf("next delivery answered with %+v, want accepted", d)
			}
			break
		}
	}
	ts.onConn(t, func(c *conn) {
		if c.inBytes != 0 || c.inPartial != 0 {
			t.Errorf("the connection still counts %d bytes read (%d unfinished)", c.inBytes, c.inPartial)
		}
	})
	if c := ts.MustCounts(t, "small"); c.Active != 1 {
		t.Errorf("%d messages in the queue, want the small one", c.Active)
	}
}

// TestUnfinishedDeliveriesAreCapped starts unfinished deliveries on three
// sessions of a connection whose incoming buffer holds two. Each session's
// window is what is left of the buffer when it begins, so only the cap
// on unfinished bytes stops the third: its link is detached with
// amqp:resource-limit-exceeded and its bytes are let go.
func TestUnfinishedDeliveriesAreCapped(t *testing.T) {
	ts := newTestServer(t, func(c *Config) {
		c.MaxMessageSize = 512 << 10
		c.Limits.MaxIncomingBuffer = 1 << 20
	})
	p := ts.rawDial(t)
	p.open()
	for ch := range uint16(3) {
		p.writeFrame(ch, beginFrame())
		if b, ok := p.readFrame().(*frames.Begin); !ok || b.IncomingWindow != 16 {
			t.Fatalf("begin %+v, want an incoming window of 16 frames (1 MiB of 64 KiB frames)", b)
		}
		p.writeFrame(ch, senderAttach("q"))
		p.readFrame()
		p.readFrame()
	}
	chunk := make([]byte, 65000)
	for ch := range uint16(3) {
		for i := range 7 { // 455 KB each, none finished
			p.writeFrame(ch, transferFrame(0, 0, i == 0, true, chunk))
		}
	}
	for {
		d, ok := p.readFrame().(*frames.Detach)
		if !ok {
			continue
		}
		if d.Error == nil || d.Error.Condition != frames.CondResourceLimitExceeded {
			t.Fatalf("detach %+v, want resource-limit-exceeded", d)
		}
		break
	}
	p.sync(0)
	ts.onConn(t, func(c *conn) {
		if c.inPartial != 2*7*65000 || c.inBytes != c.inPartial {
			t.Errorf("%d bytes held, %d of them unfinished, want the two sessions' %d", c.inBytes, c.inPartial, 2*7*65000)
		}
		if c.sessions[2].links[0] != nil {
			t.Error("the third session's link is still attached")
		}
	})
}

// TestWindowViolation sends past the incoming window the server gave: the
// session ends with amqp:session:window-violation.
func TestWindowViolation(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.Limits.MaxIncomingBuffer = 128 << 10 })
	p := ts.rawDial(t)
	p.open()
	p.writeFrame(0, beginFrame())
	if b, ok := p.readFrame().(*frames.Begin); !ok || b.IncomingWindow != 2 {
		t.Fatalf("begin %+v, want an incoming window of 2 frames", b)
	}
	p.writeFrame(0, senderAttach("q"))
	p.readFrame()
	p.readFrame()
	// The first frame leaves room for one more and is answered with a
	// flow restoring the window to 2; after two more the buffer is full
	// and the window closed, so the fourth is a violation.
	chunk := make([]byte, 60<<10)
	for i := range 4 {
		p.writeFrame(0, transferFrame(0, 0, i == 0, true, chunk))
	}
	for {
		if e, ok := p.readFrame().(*frames.End); ok {
			if e.Error == nil || e.Error.Condition != frames.CondWindowViolation {
				t.Fatalf("end %+v, want window-violation", e)
			}
			break
		}
	}
	ts.onConn(t, func(c *conn) {
		if c.inBytes != 0 || c.inPartial != 0 {
			t.Errorf("%d bytes (%d unfinished) still counted after the session ended", c.inBytes, c.inPartial)
		}
	})
}

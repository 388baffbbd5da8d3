package amqpserver

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
)

// sync makes a round trip through the server's connection goroutine on
// session ch (an echoed flow), so every frame written before it has been
// handled.
func (p *rawPeer) sync(ch uint16) {
	p.t.Helper()
	next := uint32(0)
	p.writeFrame(ch, &frames.Flow{NextIncomingID: &next, IncomingWindow: 100, OutgoingWindow: 100, Echo: true})
	for {
		if _, ok := p.readFrame().(*frames.Flow); ok {
			return
		}
	}
}

// onConn runs f on the connection goroutine of the server's only
// connection and waits for it, so a test can read run's state.
func (ts *testServer) onConn(t testing.TB, f func(c *conn)) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ts.srv.mu.Lock()
		var c *conn
		for x := range ts.srv.mu.conns {
			c = x
		}
		n := len(ts.srv.mu.conns)
		open := n == 1 && ts.srv.mu.open == 1 // past its handshake (c.ctx is serve's to set: not read here)
		ts.srv.mu.Unlock()
		if open {
			done := make(chan struct{})
			if c.post(func() { f(c); close(done) }) {
				select {
				case <-done:
					return
				case <-time.After(time.Until(deadline)):
					t.Fatal("the connection did not run the posted check")
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections, want 1 open", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestSessionLimitIsChannelMax(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.Limits.MaxSessionsPerConnection = 3 })
	p := ts.rawDial(t)
	p.writeHeader(frames.SASLHeader)
	p.readHeader()
	p.readFrame()
	p.writeFrame(0, &frames.SASLInit{Mechanism: "PLAIN", InitialResponse: []byte("\x00" + testKeyName + "\x00" + testKey)})
	p.readFrame()
	p.writeHeader(frames.AMQPHeader)
	p.readHeader()
	p.writeFrame(0, &frames.Open{ContainerID: "raw", MaxFrameSize: 65536, ChannelMax: 100})
	if o, ok := p.readFrame().(*frames.Open); !ok || o.ChannelMax != 2 {
		t.Fatalf("open %+v, want channel-max 2", o)
	}
	for ch := range uint16(3) {
		p.writeFrame(ch, beginFrame())
		if _, ok := p.readFrame().(*frames.Begin); !ok {
			t.Fatalf("session on channel %d refused", ch)
		}
	}
	p.writeFrame(3, beginFrame())
	if e := p.expectClose(); e == nil || e.Condition != frames.CondFramingError {
		t.Fatalf("close %+v, want framing-error for a channel above channel-max", e)
	}
}

// TestLinksPerConnection attaches links over several sessions up to the
// connection's cap: the next attach ends its session with Service Bus's
// condition and text; a detach frees a handle again.
func TestLinksPerConnection(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.Limits.MaxLinksPerConnection = 3 })
	p := ts.rawDial(t)
	p.open()
	attach := func(ch uint16, h uint32) frames.Body {
		a := senderAttach("q")
		a.Handle = h
		p.writeFrame(ch, a)
		return p.readFrame()
	}
	p.writeFrame(0, beginFrame())
	p.readFrame()
	p.writeFrame(1, beginFrame())
	p.readFrame()
	for i, at := range [][2]uint32{{0, 0}, {0, 1}, {1, 0}} {
		if _, ok := attach(uint16(at[0]), at[1]).(*frames.Attach); !ok {
			t.Fatalf("attach %d refused", i)
		}
		p.readFrame() // flow granting credit
	}
	e, ok := attach(1, 1).(*frames.End)
	if !ok || e.Error == nil || e.Error.Condition != frames.CondResourceLimitExceeded ||
		!strings.Contains(e.Error.Description, "The maximum number of handles allowed is 3") {
		t.Fatalf("fourth attach answered with %+v, want end with resource-limit-exceeded", e)
	}
	p.writeFrame(1, &frames.End{}) // session 1 and its link are gone
	if _, ok := attach(0, 2).(*frames.Attach); !ok {
		t.Fatal("attach refused after a session's links were freed")
	}
	p.readFrame()
	if _, ok := attach(0, 3).(*frames.End); !ok {
		t.Fatal("attach beyond the cap accepted")
	}
}

// TestRefusedAttachFreesItsLink refuses attaches the client never
// answers: each keeps only its handle until the client's detach, and
// those count against the connection's links, so the memory they hold is
// bounded. A refusal the client answers frees its handle for reuse.
func TestRefusedAttachFreesItsLink(t *testing.T) {
	const max = 50
	ts := newTestServer(t, func(c *Config) { c.Limits.MaxLinksPerConnection = max })
	p := ts.rawDial(t)
	p.open()
	p.writeFrame(0, beginFrame())
	p.readFrame()

	// Answered refusals on one handle, many times over.
	for range 500 {
		p.writeFrame(0, senderAttach("missing"))
		if _, ok := p.readFrame().(*frames.Attach); !ok {
			t.Fatal("no attach reply")
		}
		if d, ok := p.readFrame().(*frames.Detach); !ok || d.Error == nil || d.Error.Condition != frames.CondNotFound {
			t.Fatalf("got %+v, want detach with not-found", d)
		}
		p.writeFrame(0, &frames.Detach{Handle: 0, Closed: true})
	}
	p.sync(0)
	ts.onConn(t, func(c *conn) {
		s := c.sessions[0]
		if c.links != 0 || len(s.links) != 0 || len(s.awaiting) != 0 {
			t.Errorf("after 500 answered refusals: %d handles in use, %d links, %d awaiting; want none", c.links, len(s.links), len(s.awaiting))
		}
	})

	// Unanswered refusals on distinct handles: only the handles are kept.
	for h := range uint32(max) {
		a := senderAttach("missing")
		a.Handle = h
		p.writeFrame(0, a)
		p.readFrame()
		p.readFrame()
	}
	ts.onConn(t, func(c *conn) {
		if s := c.sessions[0]; len(s.links) != 0 || len(s.awaiting) != max {
			t.Errorf("%d links and %d handles awaiting a detach, want 0 and %d", len(s.links), len(s.awaiting), max)
		}
	})
	a := senderAttach("missing")
	a.Handle = max
	p.writeFrame(0, a)
	if e, ok := p.readFrame().(*frames.End); !ok || e.Error == nil || e.Error.Condition != frames.CondResourceLimitExceeded {
		t.Fatalf("attach beyond the cap answered with %+v, want end with resource-limit-exceeded", e)
	}
	ts.onConn(t, func(c *conn) {
		if c.links != 0 {
			t.Errorf("%d handles in use after the session ended, want 0", c.links)
		}
	})
}

// TestQueuedRepliesCap sends $management requests on a connection whose
// reply link has no credit: once MaxQueuedReplies replies wait, further
// requests are rejected with amqp:resource-limit-exceeded; the waiting
// replies go out when credit comes.
func TestQueuedRepliesCap(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.Limits.MaxQueuedReplies = 3 })
	p := ts.rawDial(t)
	p.open()
	p.writeFrame(0, beginFrame())
	p.readFrame()
	p.writeFrame(0, senderAttach("q/$management"))
	p.readFrame() // attach
	p.readFrame() // flow
	p.writeFrame(0, &frames.Attach{Name: "reply", Handle: 1, Role: frames.RoleReceiver,
		Source: &frames.Source{Address: "q/$management"}, Target: &frames.Target{Address: "reply-1"}})
	p.readFrame()
	request := func(id uint32) {
		m := &frames.Message{
			Properties:            &frames.MessageProperties{MessageID: fmt.Sprint(id), ReplyTo: "reply-1"},
			ApplicationProperties: encoding.Map{{Key: "operation", Value: "com.microsoft:peek-message"}},
			Value:                 encoding.Map{{Key: "from-sequence-number", Value: int64(0)}, {Key: "message-count", Value: int32(1)}},
		}
		var b buffer.Buffer
		if err := m.MarshalAMQP(&b); err != nil {
			t.Fatal(err)
		}
		format := uint32(0)
		p.writeFrame(0, &frames.Transfer{Handle: 0, DeliveryID: &id, DeliveryTag: []byte{byte(id)}, MessageFormat: &format, Payload: b.Bytes()})
	}
	for id := range uint32(3) {
		request(id)
	}
	ts.waitFor(t, "3 replies waiting", func(c *conn) bool { return c.sessions[0].links[1].out.replyBacklog == 3 })
	request(3)
	for {
		d, ok := p.readFrame().(*frames.Disposition)
		if !ok || d.First != 3 {
			continue
		}
		if rej, ok := d.State.(*frames.Rejected); !ok || rej.Error == nil || rej.Error.Condition != frames.CondResourceLimitExceeded {
			t.Fatalf("request beyond the cap answered with %+v, want rejected with resource-limit-exceeded", d.State)
		}
		break
	}
	h, zero, ten := uint32(1), uint32(0), uint32(10)
	p.writeFrame(0, &frames.Flow{NextIncomingID: &zero, IncomingWindow: 100, OutgoingWindow: 100, Handle: &h, DeliveryCount: &zero, LinkCredit: &ten})
	for got := 0; got < 3; {
		if tr, ok := p.readFrame().(*frames.Transfer); ok && tr.Handle == 1 {
			got++
		}
	}
}

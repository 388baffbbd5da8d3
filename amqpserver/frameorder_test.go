package amqpserver

import (
	"fmt"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
)

// writeFrames writes bodies on channel ch in one socket write, so the
// server reads them in one burst.
func (p *rawPeer) writeFrames(ch uint16, bodies ...frames.Body) {
	p.t.Helper()
	var b buffer.Buffer
	for _, body := range bodies {
		if err := frames.Write(&b, frames.Frame{Channel: ch, Body: body}); err != nil {
			p.t.Fatal(err)
		}
	}
	p.writeBytes(b.Bytes())
}

// sessionReceiverAttach attaches handle h as a peek-lock receiver of
// message session id on entity.
func sessionReceiverAttach(entity, id string, h uint32) *frames.Attach {
	second := frames.ReceiverSettleModeSecond
	return &frames.Attach{Name: fmt.Sprintf("session-receiver-%d", h), Handle: h, Role: frames.RoleReceiver,
		RcvSettleMode: &second, Target: &frames.Target{},
		Source: &frames.Source{Address: entity, Filter: encoding.Map{{Key: sessionFilterKey,
			Value: encoding.Described{Descriptor: sessionFilterCode, Value: id}}}}}
}

// creditFlow grants credit on handle h of a session whose window is
// wide open.
func creditFlow(h, deliveryCount, credit uint32) *frames.Flow {
	next := uint32(0)
	return &frames.Flow{NextIncomingID: &next, IncomingWindow: 1 << 20, OutgoingWindow: 1 << 20,
		Handle: &h, DeliveryCount: &deliveryCount, LinkCredit: &credit}
}

// TestDispositionsBeforeDetachEndClose is the Python SDK's habit: it
// settles the messages of a session receiver and detaches it (or ends
// the session, or closes the connection) in one write. Every settlement
// must be applied before the detach releases the session lock, so no
// completed message comes back.
func TestDispositionsBeforeDetachEndClose(t *testing.T) {
	const n = 40
	for _, last := range []string{"detach", "end", "close"} {
		for _, settled := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/settled=%v", last, settled), func(t *testing.T) {
				ts := newTestServer(t, nil)
				ts.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "sq", RequiresSession: true})
				for i := range n {
					ts.MustSend(t, "sq", &core.Message{Body: []byte{byte(i)}, SessionID: "s1"})
				}
				p := ts.rawDial(t)
				p.open()
				p.writeFrame(0, &frames.Begin{IncomingWindow: 1 << 20, OutgoingWindow: 1 << 20, HandleMax: 10})
				p.readFrame()
				p.writeFrame(0, sessionReceiverAttach("sq", "s1", 0))
				if a, ok := p.readFrame().(*frames.Attach); !ok || a.Source == nil {
					t.Fatalf("attach answered with %+v", a)
				}
				p.writeFrame(0, creditFlow(0, 0, n))
				for got := 0; got < n; {
					if _, ok := p.readFrame().(*frames.Transfer); ok {
						got++
					}
				}

				burst := make([]frames.Body, 0, n+1)
				for id := range uint32(n) {
					burst = append(burst, &frames.Disposition{Role: frames.RoleReceiver, First: id, Settled: settled, State: &frames.Accepted{}})
				}
				switch last {
				case "detach":
					burst = append(burst, &frames.Detach{Handle: 0, Closed: true})
				case "end":
					burst = append(burst, &frames.End{})
				case "close":
					burst = append(burst, &frames.Close{})
				}
				p.writeFrames(0, burst...)
				p.awaitReply(last)

				if c := ts.MustCounts(t, "sq"); c.Active != 0 {
					t.Errorf("%d of %d completed messages are back after the %s", c.Active, n, last)
				}
			})
		}
	}
}

// TestDispositionsBeforeHangUp: a client that settles its deliveries and
// hangs up in one go (the dispositions, then the socket closed, with no
// AMQP close) still has every settlement applied before the connection's
// end releases its session lock: none of the completed messages comes
// back. Whether the client awaits our answers (settled=false, as the
// Azure SDKs do: writing them then meets a reset socket) or not, the
// frames it sent before hanging up are read and handled, in order.
func TestDispositionsBeforeHangUp(t *testing.T) {
	const n, rounds = 500, 4
	for _, settled := range []bool{true, false} {
		t.Run(fmt.Sprintf("settled=%v", settled), func(t *testing.T) {
			ts := newTestServer(t, nil)
			ts.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "sq", RequiresSession: true})
			for round := range rounds {
				for i := range n {
					ts.MustSend(t, "sq", &core.Message{Body: []byte{byte(i)}, SessionID: "s1"})
				}
				p := ts.rawDial(t)
				p.open()
				p.writeFrame(0, &frames.Begin{IncomingWindow: 1 << 20, OutgoingWindow: 1 << 20, HandleMax: 10})
				p.readFrame()
				p.writeFrame(0, sessionReceiverAttach("sq", "s1", 0))
				if a, ok := p.readFrame().(*frames.Attach); !ok || a.Source == nil {
					t.Fatalf("attach answered with %+v", a)
				}
				p.writeFrame(0, creditFlow(0, 0, n))
				for got := 0; got < n; {
					if _, ok := p.readFrame().(*frames.Transfer); ok {
						got++
					}
				}
				burst := make([]frames.Body, 0, n)
				for id := range uint32(n) {
					burst = append(burst, &frames.Disposition{Role: frames.RoleReceiver, First: id, Settled: settled, State: &frames.Accepted{}})
				}
				p.writeFrames(0, burst...)
				p.nc.Close()
				waitFor(t, "the server to end the connection", 10*time.Second, func() bool {
					ts.srv.mu.Lock()
					defer ts.srv.mu.Unlock()
					return ts.srv.mu.open == 0
				})
				if c := ts.MustCounts(t, "sq"); c.Active != 0 {
					t.Fatalf("round %d: %d of %d completed messages are back after the hang-up", round, c.Active, n)
				}
			}
		})
	}
}

// awaitReply reads frames until the answer to a detach, end or close.
func (p *rawPeer) awaitReply(of string) {
	p.t.Helper()
	for {
		switch p.readFrame().(type) {
		case *frames.Detach:
			if of == "detach" {
				return
			}
		case *frames.End:
			if of == "end" {
				return
			}
		case *frames.Close:
			if of == "close" {
				return
			}
		}
	}
}

package amqpserver

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/Azure/go-amqp"

	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/sas"
)

func TestHandleLimits(t *testing.T) {
	ts := newTestServer(t, nil)
	p := ts.rawDial(t)
	p.open()
	p.writeFrame(0, beginFrame())
	if b, ok := p.readFrame().(*frames.Begin); !ok || b.HandleMax != DefaultMaxLinksPerSession-1 {
		t.Fatalf("begin reply %+v, want handle-max %d", b, DefaultMaxLinksPerSession-1)
	}
	p.writeFrame(0, senderAttach("q"))
	p.readFrame()                      // attach
	p.readFrame()                      // flow
	p.writeFrame(0, senderAttach("q")) // same handle again
	if e, ok := p.readFrame().(*frames.End); !ok || e.Error == nil || e.Error.Condition != frames.CondHandleInUse {
		t.Fatalf("got %+v, want end with handle-in-use", e)
	}

	// Frames after our end are ignored until the client's end, after
	// which the channel can be reused.
	p.writeFrame(0, senderAttach("q"))
	p.writeFrame(0, &frames.End{})
	p.writeFrame(0, beginFrame())
	if _, ok := p.readFrame().(*frames.Begin); !ok {
		t.Fatal("channel 0 not reusable after the end handshake")
	}

	p.writeFrame(1, beginFrame())
	p.readFrame()
	a := senderAttach("q")
	a.Handle = DefaultMaxLinksPerSession
	p.writeFrame(1, a)
	if e := p.expectClose(); e == nil || e.Condition != frames.CondFramingError {
		t.Fatalf("got close %+v, want framing-error for a handle above handle-max", e)
	}
}

func TestTransferWithoutCredit(t *testing.T) {
	ts := newTestServer(t, nil)
	p := ts.rawDial(t)
	p.open()
	p.writeFrame(0, beginFrame())
	p.readFrame()
	p.writeFrame(0, &frames.Attach{Name: "r", Handle: 0, Role: frames.RoleReceiver,
		Source: &frames.Source{Address: "q"}, Target: &frames.Target{}})
	p.readFrame()
	// Transfers flow from the server on this link; the client must not send.
	id, format := uint32(0), uint32(0)
	p.writeFrame(0, &frames.Transfer{Handle: 0, DeliveryID: &id, DeliveryTag: []byte{1}, MessageFormat: &format, Payload: dataSection(t, 1)})
	if e, ok := p.readFrame().(*frames.End); !ok || e.Error == nil || e.Error.Condition != frames.CondNotAllowed {
		t.Fatalf("got %+v, want end with not-allowed", e)
	}
}

// TestCBSReplyByLinkName routes the put-token reply the way rhea needs:
// the reply link has no target address and reply-to is its link name.
func TestCBSReplyByLinkName(t *testing.T) {
	ts := newTestServer(t, nil)
	c := ts.dialWith(t, &amqp.ConnOptions{SASLType: amqp.SASLTypeAnonymous()})
	s := mustSession(t, c)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	snd := mustSender(t, s, "$cbs")
	rcv, err := s.NewReceiver(ctx, "$cbs", &amqp.ReceiverOptions{Name: "cbs-1234", Credit: 10})
	if err != nil {
		t.Fatal(err)
	}
	aud := "sb://localhost/q"
	replyTo := "cbs-1234"
	req := &amqp.Message{
		Value:                 sas.Sign(aud, testKeyName, testKey, time.Now().Add(time.Hour)),
		Properties:            &amqp.MessageProperties{MessageID: "js-1", ReplyTo: &replyTo},
		ApplicationProperties: map[string]any{"operation": "put-token", "type": "servicebus.windows.net:sastoken", "name": aud},
	}
	if err := snd.Send(ctx, req, nil); err != nil {
		t.Fatal(err)
	}
	m, err := rcv.Receive(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.ApplicationProperties["status-code"]; got != int32(202) {
		t.Errorf("status-code = %#v, want 202", got)
	}
	mustSend(t, mustSender(t, s, "q"), "authorised by an sb:// audience")
}

func TestTopicSubscription(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	ts.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "s"})
	s := ts.session(t)
	var ae *amqp.Error
	if _, err := s.NewReceiver(t.Context(), "t", nil); !errors.As(err, &ae) || ae.Condition != amqp.ErrCondNotAllowed {
		t.Errorf("receiver on a topic: %v, want amqp:not-allowed", err)
	}
	if _, err := s.NewSender(t.Context(), "t/Subscriptions/s", nil); !errors.As(err, &ae) || ae.Condition != amqp.ErrCondNotAllowed {
		t.Errorf("sender to a subscription: %v, want amqp:not-allowed", err)
	}
	mustSend(t, mustSender(t, s, "t"), "fan-out")
	r := mustReceiver(t, s, "t/Subscriptions/s", amqp.ReceiverSettleModeSecond)
	m := mustReceive(t, r)
	if string(m.GetData()) != "fan-out" {
		t.Errorf("subscription got %q", m.GetData())
	}
	if err := r.AcceptMessage(t.Context(), m); err != nil {
		t.Fatal(err)
	}
}

func TestReceiveFromDeletedEntityDetaches(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "gone"})
	s := ts.session(t)
	r := mustReceiver(t, s, "gone", amqp.ReceiverSettleModeSecond)
	if err := r.IssueCredit(1); err != nil {
		t.Fatal(err)
	}
	if err := ts.Broker.DeleteEntity(t.Context(), "gone"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err := r.Receive(ctx, nil)
	var le *amqp.LinkError
	if !errors.As(err, &le) || le.RemoteErr == nil || le.RemoteErr.Condition != amqp.ErrCondNotFound {
		t.Fatalf("receive after delete: %v, want a detach with amqp:not-found", err)
	}
}

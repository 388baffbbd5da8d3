package amqpserver

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/Azure/go-amqp"

	"github.com/omnibusmq/omnibus/core/coretest"
)

// mgmtCall sends one $management request on links shaped like the Go
// SDK's and returns the reply.
func mgmtCall(t testing.TB, s *amqp.Session, entity, op string, body map[string]any) *amqp.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	node := entity + "/$management"
	replyTo := node + "-reply-to-test"
	snd := mustSender(t, s, node)
	defer snd.Close(ctx)
	rcv, err := s.NewReceiver(ctx, node, &amqp.ReceiverOptions{TargetAddress: replyTo, Credit: 10})
	if err != nil {
		t.Fatalf("attach reply link: %v", err)
	}
	defer rcv.Close(ctx)
	req := &amqp.Message{
		Value:                 body,
		Properties:            &amqp.MessageProperties{MessageID: "mgmt-1", ReplyTo: &replyTo},
		ApplicationProperties: map[string]any{"operation": op},
	}
	if err := snd.Send(ctx, req, nil); err != nil {
		t.Fatalf("send %s: %v", op, err)
	}
	m, err := rcv.Receive(ctx, nil)
	if err != nil {
		t.Fatalf("receive %s reply: %v", op, err)
	}
	if m.Properties == nil || m.Properties.CorrelationID != "mgmt-1" {
		t.Errorf("reply properties %+v, want correlation-id mgmt-1", m.Properties)
	}
	return m
}

func TestManagementPeek(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.MustSend(t, "q", coretest.Text("a"), coretest.Text("b"))
	m := mgmtCall(t, ts.session(t), "q", "com.microsoft:peek-message",
		map[string]any{"from-sequence-number": int64(1), "message-count": int32(10)})
	if got := m.ApplicationProperties["statusCode"]; got != int32(200) {
		t.Fatalf("statusCode = %#v, want 200", got)
	}
	body, ok := m.Value.(map[string]any)
	if !ok {
		t.Fatalf("body = %T, want a map", m.Value)
	}
	if msgs, _ := body["messages"].([]any); len(msgs) != 2 {
		t.Errorf("peeked %d messages, want 2", len(msgs))
	}
}

func TestManagementNeedsAuthorization(t *testing.T) {
	ts := newTestServer(t, nil)
	c := ts.dialWith(t, &amqp.ConnOptions{SASLType: amqp.SASLTypeAnonymous()})
	_, err := mustSession(t, c).NewSender(t.Context(), "q/$management", nil)
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae.Condition != amqp.ErrCondUnauthorizedAccess {
		t.Fatalf("attach $management without a token: %v, want unauthorized-access", err)
	}
}

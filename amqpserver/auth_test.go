package amqpserver

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/Azure/go-amqp"

	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core/sas"
)

// putToken runs one $cbs put-token the way the Go SDK does (a fresh
// session, a sender to $cbs and a receiver whose target is the reply-to)
// and returns the reply's status code and description.
func putToken(t testing.TB, c *amqp.Conn, audience, token string) (int32, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	s := mustSession(t, c)
	defer s.Close(ctx)
	snd := mustSender(t, s, "$cbs")
	replyTo := "$cbs-reply-to-test"
	rcv, err := s.NewReceiver(ctx, "$cbs", &amqp.ReceiverOptions{TargetAddress: replyTo, Credit: 10})
	if err != nil {
		t.Fatalf("attach $cbs receiver: %v", err)
	}
	req := &amqp.Message{
		Value:      token,
		Properties: &amqp.MessageProperties{MessageID: "req-1", ReplyTo: &replyTo},
		ApplicationProperties: map[string]any{
			"operation":  "put-token",
			"type":       "servicebus.windows.net:sastoken",
			"name":       audience,
			"expiration": "0",
		},
	}
	if err := snd.Send(ctx, req, nil); err != nil {
		t.Fatalf("send put-token: %v", err)
	}
	m, err := rcv.Receive(ctx, nil)
	if err != nil {
		t.Fatalf("receive put-token reply: %v", err)
	}
	if got := m.Properties.CorrelationID; got != "req-1" {
		t.Errorf("correlation-id = %#v, want \"req-1\"", got)
	}
	status, ok := m.ApplicationProperties["status-code"].(int32)
	if !ok {
		t.Fatalf("status-code = %#v, want an int32", m.ApplicationProperties["status-code"])
	}
	desc, _ := m.ApplicationProperties["status-description"].(string)
	return status, desc
}

func TestSASLPlainWrongKey(t *testing.T) {
	ts := newTestServer(t, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err := amqp.Dial(ctx, "amqp://"+ts.addr, &amqp.ConnOptions{SASLType: amqp.SASLTypePlain(testKeyName, "wrong")})
	if err == nil {
		t.Fatal("Dial with a wrong key succeeded")
	}
}

func TestAnonymousNeedsCBSToken(t *testing.T) {
	ts := newTestServer(t, nil)
	c := ts.dialWith(t, &amqp.ConnOptions{SASLType: amqp.SASLTypeAnonymous()})
	s := mustSession(t, c)

	_, err := s.NewSender(t.Context(), "q", nil)
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae.Condition != amqp.ErrCondUnauthorizedAccess {
		t.Fatalf("attach without token: %v, want unauthorized-access", err)
	}

	aud := "amqp://" + ts.addr + "/q"
	if st, desc := putToken(t, c, aud, "SharedAccessSignature sr=x&sig=bad&se=1&skn="+testKeyName); st != 401 {
		t.Errorf("bad token: status %d (%s), want 401", st, desc)
	}
	if st, desc := putToken(t, c, "amqp://"+ts.addr+"/nope", sas.Sign("amqp://"+ts.addr+"/nope", testKeyName, testKey, time.Now().Add(time.Hour))); st != 404 {
		t.Errorf("unknown entity: status %d (%s), want 404", st, desc)
	}
	if st, desc := putToken(t, c, aud, sas.Sign(aud, testKeyName, testKey, time.Now().Add(time.Hour))); st != 202 {
		t.Fatalf("good token: status %d (%s), want 202", st, desc)
	}
	mustSend(t, mustSender(t, s, "q"), "after token")
	r := mustReceiver(t, s, "q", amqp.ReceiverSettleModeFirst)
	if got := string(mustReceive(t, r).GetData()); got != "after token" {
		t.Errorf("body = %q", got)
	}
}

func TestListenOnlyKeyCannotSend(t *testing.T) {
	ts := newTestServer(t, nil)
	c := ts.dialWith(t, &amqp.ConnOptions{SASLType: amqp.SASLTypePlain("listen-only", "listen-key")})
	s := mustSession(t, c)
	_, err := s.NewSender(t.Context(), "q", nil)
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae.Condition != amqp.ErrCondUnauthorizedAccess {
		t.Fatalf("send attach with a Listen key: %v, want unauthorized-access", err)
	}
	mustReceiver(t, s, "q", amqp.ReceiverSettleModeSecond)
}

func TestUnknownSASLMechanism(t *testing.T) {
	ts := newTestServer(t, nil)
	p := ts.rawDial(t)
	p.writeHeader(frames.SASLHeader)
	p.readHeader()
	mechs, ok := p.readFrame().(*frames.SASLMechanisms)
	if !ok || len(mechs.Mechanisms) == 0 || mechs.Mechanisms[0] != "ANONYMOUS" {
		t.Fatalf("mechanisms = %+v, want ANONYMOUS first", mechs)
	}
	p.writeFrame(0, &frames.SASLInit{Mechanism: "SCRAM-SHA-1"})
	if o, ok := p.readFrame().(*frames.SASLOutcome); !ok || o.Code != frames.SASLAuth {
		t.Fatalf("outcome = %+v, want auth failure", o)
	}
}

func TestAMQPHeaderWithoutSASLRefused(t *testing.T) {
	ts := newTestServer(t, nil)
	p := ts.rawDial(t)
	p.writeHeader(frames.AMQPHeader)
	if h := p.readHeader(); h != frames.SASLHeader {
		t.Fatalf("got %v, want the SASL header", h)
	}
	if _, err := p.rd.ReadFrame(); err == nil {
		t.Fatal("connection still open after a refused header")
	}
}

func TestNoAuthAcceptsPlainAMQP(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.Auth = nil })
	c := ts.dialWith(t, nil) // no SASL at all
	s := mustSession(t, c)
	mustSend(t, mustSender(t, s, "q"), "open")
}

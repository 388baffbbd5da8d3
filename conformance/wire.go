package conformance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/Azure/go-amqp"
)

// Wire-level access with go-amqp, for what the SDK hides: settle modes,
// credit, drain and raw outcomes.

// AMQPSession dials the endpoint with SASL PLAIN (the connection
// string's key name and key) and begins a session; both close when the
// scenario ends.
func (t *T) AMQPSession() *amqp.Session {
	t.live()
	tg := t.target
	addr := "amqps://" + tg.cs.Host
	if tg.cs.UseDevelopmentEmulator {
		addr = "amqp://" + tg.AMQPHost()
	}
	host, _, _ := strings.Cut(tg.cs.Host, ":")
	conn, err := amqp.Dial(t.ctx, addr, &amqp.ConnOptions{
		SASLType:    amqp.SASLTypePlain(tg.cs.SharedAccessKeyName, tg.cs.SharedAccessKey),
		HostName:    host,
		IdleTimeout: 2 * time.Minute,
	})
	t.must(err, "dialing %s with SASL PLAIN", addr)
	t.Cleanup(func() { _ = conn.Close() })
	s, err := conn.NewSession(t.ctx, nil)
	t.must(err, "beginning an AMQP session")
	return s
}

// WireSender attaches a sender link; settled selects presettled transfers.
func (t *T) WireSender(s *amqp.Session, entity string, settled bool) *amqp.Sender {
	opts := &amqp.SenderOptions{}
	if settled {
		opts.SettlementMode = amqp.SenderSettleModeSettled.Ptr()
	}
	snd, err := s.NewSender(t.ctx, entity, opts)
	t.must(err, "attaching a sender to %s", entity)
	t.Cleanup(func() { _ = snd.Close(context.Background()) })
	return snd
}

// WireReceiver attaches a receiver with manual credit: peek-lock
// (rcv-settle-mode second) or receive-and-delete (presettled transfers,
// rcv-settle-mode first).
func (t *T) WireReceiver(s *amqp.Session, entity string, receiveAndDelete bool) *amqp.Receiver {
	opts := &amqp.ReceiverOptions{Credit: -1}
	if receiveAndDelete {
		opts.SettlementMode = amqp.ReceiverSettleModeFirst.Ptr()
		opts.RequestedSenderSettleMode = amqp.SenderSettleModeSettled.Ptr()
	} else {
		opts.SettlementMode = amqp.ReceiverSettleModeSecond.Ptr()
	}
	r, err := s.NewReceiver(t.ctx, entity, opts)
	t.must(err, "attaching a receiver to %s", entity)
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

// wireReceive waits up to wait for one message.
func (t *T) wireReceive(r *amqp.Receiver, wait time.Duration) *amqp.Message {
	ctx, cancel := context.WithTimeout(t.ctx, wait)
	defer cancel()
	m, err := r.Receive(ctx, nil)
	switch {
	case err == nil:
		return m
	case t.ctx.Err() != nil:
		t.Abortf("time budget exhausted while receiving: %v", err)
	case errors.Is(err, context.DeadlineExceeded):
		t.Fatalf("no message within %s", wait)
	default:
		t.Abortf("receive: %v", err)
	}
	return nil
}

// wireMessage is a message with one data section.
func wireMessage(body []byte) *amqp.Message { return amqp.NewMessage(body) }

// bodyOf returns the concatenated data sections of m.
func bodyOf(m *amqp.Message) string {
	var b strings.Builder
	for _, d := range m.Data {
		b.Write(d)
	}
	return b.String()
}

// wireDeliveryCount is the header's delivery-count: prior delivery attempts.
func wireDeliveryCount(m *amqp.Message) uint32 {
	if m.Header == nil {
		return 0
	}
	return m.Header.DeliveryCount
}

// sequenceOf reads the x-opt-sequence-number annotation.
func sequenceOf(m *amqp.Message) (int64, error) {
	v, ok := m.Annotations["x-opt-sequence-number"].(int64)
	if !ok {
		return 0, fmt.Errorf("x-opt-sequence-number = %#v, want a long", m.Annotations["x-opt-sequence-number"])
	}
	return v, nil
}

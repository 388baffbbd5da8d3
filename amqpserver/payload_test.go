package amqpserver

import (
	"bytes"
	"testing"

	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
)

// A payload's slices, cut at any frame size, put together give its head
// followed by its body.
func TestPayloadSlicesMakeTheWhole(t *testing.T) {
	head, body := []byte("sections"), []byte("the body of it")
	p := payload{head: head, body: body}
	whole := append(append([]byte(nil), head...), body...)
	if p.len() != len(whole) {
		t.Fatalf("len %d, want %d", p.len(), len(whole))
	}
	for chunk := 1; chunk <= len(whole)+1; chunk++ {
		var got []byte
		for from := 0; from < p.len(); from += chunk {
			a, b := p.slice(from, min(from+chunk, p.len()))
			got = append(append(got, a...), b...)
		}
		if !bytes.Equal(got, whole) {
			t.Fatalf("frames of %d bytes give %q, want %q", chunk, got, whole)
		}
	}
}

// A delivery of several frames, its sections in one piece and its body
// in another, reaches the client as the message that was sent, byte for
// byte.
func TestDeliveryFramesCarryTheMessage(t *testing.T) {
	ts := newTestServer(t, nil)
	body := make([]byte, 200<<10)
	for i := range body {
		body[i] = byte(i % 251)
	}
	ts.MustSend(t, "q", &core.Message{MessageID: "m1", Subject: "big", BodyType: core.BodyBinary, Body: body,
		ApplicationProperties: map[string]any{"k": "v"}})
	p := ts.rawDial(t)
	p.open()
	p.attachRawReceiver("q", 100, frames.ReceiverSettleModeSecond)
	p.grant(0, 100, 0, 1)
	var raw []byte
	n := 0
	for {
		tr, ok := p.readFrame().(*frames.Transfer)
		if !ok {
			continue
		}
		n++
		raw = append(raw, tr.Payload...)
		if !tr.More {
			break
		}
	}
	m, err := frames.UnmarshalMessage(raw)
	if err != nil {
		t.Fatalf("the %d frames' payload does not decode: %v", n, err)
	}
	if n < 2 || len(m.Data) != 1 || !bytes.Equal(m.Data[0], body) {
		t.Fatalf("got %d frames, %d data sections, want several frames and the 200 KiB body sent", n, len(m.Data))
	}
	if m.Properties == nil || m.Properties.MessageID != "m1" || m.Properties.Subject != "big" || m.ApplicationProperties == nil {
		t.Errorf("sections arrived as properties %+v, application properties %v", m.Properties, m.ApplicationProperties)
	}
}

package amqpserver

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
)

// A clean shutdown answers every send it stored: with thousands of
// unsettled sends pipelined when Shutdown is called, the set of messages
// found in the queue afterwards is exactly the set the client heard
// "accepted" for, and the connection then closes with
// amqp:connection:forced. (Before, the close went out at once and the
// sends still in flight were stored unanswered: a client retrying them
// made duplicates.)
func TestShutdownAnswersEveryStoredSend(t *testing.T) {
	for round := range 3 {
		t.Run(fmt.Sprint("round", round), func(t *testing.T) { shutdownWithSendsInFlight(t) })
	}
}

func shutdownWithSendsInFlight(t *testing.T) {
	const links, perLink = 2, creditWindow // every delivery within the credit granted at attach
	ts := newTestServer(t, nil)
	p := ts.rawDial(t)
	p.open()
	p.writeFrame(0, &frames.Begin{IncomingWindow: 1 << 20, OutgoingWindow: 1 << 20, HandleMax: 10})
	p.readFrame()
	for h := range uint32(links) {
		a := senderAttach("q")
		a.Name, a.Handle = fmt.Sprint("sender-", h), h
		p.writeFrame(0, a)
		if _, ok := p.readFrame().(*frames.Attach); !ok {
			t.Fatal("no attach reply")
		}
		if f, ok := p.readFrame().(*frames.Flow); !ok || f.LinkCredit == nil || *f.LinkCredit < perLink {
			t.Fatalf("flow = %+v, want credit for %d", f, perLink)
		}
	}

	// Every transfer in one burst: delivery-id i carries message-id m-i.
	var burst buffer.Buffer
	format := uint32(0)
	for i := range uint32(links * perLink) {
		var m buffer.Buffer
		msg := &frames.Message{Properties: &frames.MessageProperties{MessageID: fmt.Sprint("m-", i)}, Data: [][]byte{[]byte("body")}}
		if err := msg.MarshalAMQP(&m); err != nil {
			t.Fatal(err)
		}
		id := i
		tr := &frames.Transfer{Handle: i % links, DeliveryID: &id, DeliveryTag: []byte(fmt.Sprint(i)), MessageFormat: &format, Payload: m.Bytes()}
		if err := frames.Write(&burst, frames.Frame{Body: tr}); err != nil {
			t.Fatal(err)
		}
	}
	p.writeBytes(burst.Bytes())
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		shut <- ts.srv.Shutdown(ctx)
	}()

	// Everything the server says before its close.
	answered := map[string]bool{}
	var closeErr *frames.Error
	for closeErr == nil {
		switch b := p.readFrame().(type) {
		case *frames.Disposition:
			if _, ok := b.State.(*frames.Accepted); !ok {
				t.Fatalf("disposition %+v, want accepted", b)
			}
			last := b.First
			if b.Last != nil {
				last = *b.Last
			}
			for id := b.First; id <= last; id++ {
				answered[fmt.Sprint("m-", id)] = true
			}
		case *frames.Close:
			if b.Error == nil {
				t.Fatal("close without an error")
			}
			closeErr = b.Error
		}
	}
	if closeErr.Condition != frames.CondConnectionForced {
		t.Errorf("close = %v, want amqp:connection:forced", closeErr)
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}

	msgs, err := ts.Broker.Peek(context.Background(), "q", core.PeekOptions{Max: links*perLink + 1})
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]bool{}
	for _, m := range msgs {
		stored[m.MessageIDString()] = true
	}
	for id := range stored {
		if !answered[id] {
			t.Errorf("%s was stored but never answered", id)
		}
	}
	for id := range answered {
		if !stored[id] {
			t.Errorf("%s was answered accepted but is not stored", id)
		}
	}
	t.Logf("%d of %d sends stored and answered before the close", len(stored), links*perLink)
}

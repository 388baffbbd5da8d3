package amqpserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"

	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
)

// What clients other than the Go and JS SDKs need (uamqp: Python's SDK,
// older .NET and Event Hubs clients), and what newer SDKs read.

// TestSASLMSSBCBS: MSSBCBS is offered and means ANONYMOUS: the connection
// opens, and must put a $cbs token before it may attach to an entity.
func TestSASLMSSBCBS(t *testing.T) {
	ts := newTestServer(t, nil)
	p := ts.rawDial(t)
	p.writeHeader(frames.SASLHeader)
	p.readHeader()
	mechs, ok := p.readFrame().(*frames.SASLMechanisms)
	if !ok || !slices.Contains(mechs.Mechanisms, mechMSSBCBS) {
		t.Fatalf("mechanisms %+v, want MSSBCBS among them", mechs)
	}
	p.writeFrame(0, &frames.SASLInit{Mechanism: mechMSSBCBS})
	if o, ok := p.readFrame().(*frames.SASLOutcome); !ok || o.Code != frames.SASLOK {
		t.Fatalf("SASL outcome %+v", o)
	}
	p.writeHeader(frames.AMQPHeader)
	p.readHeader()
	p.writeFrame(0, &frames.Open{ContainerID: "uamqp-like", MaxFrameSize: 65536, ChannelMax: 10})
	if _, ok := p.readFrame().(*frames.Open); !ok {
		t.Fatal("no open")
	}
	p.writeFrame(0, beginFrame())
	p.readFrame() // begin
	p.writeFrame(0, senderAttach("q"))
	p.readFrame() // attach with a null target
	d, ok := p.readFrame().(*frames.Detach)
	if !ok || d.Error == nil || d.Error.Condition != frames.CondUnauthorizedAccess {
		t.Fatalf("attach to q without a token: %+v, want a detach with amqp:unauthorized-access", d)
	}
}

// TestLinkAddressAsURL: a link whose address is a URL, as uamqp sends
// ("amqps://host:5671/q"), reaches the entity of its path, and its attach
// is answered with the address exactly as sent; $management too.
func TestLinkAddressAsURL(t *testing.T) {
	ts := newTestServer(t, nil)
	const url = "amqps://omnibus.example:5671/q"
	p := ts.rawDial(t)
	p.open()
	p.writeFrame(0, beginFrame())
	p.readFrame() // begin
	p.writeFrame(0, senderAttach(url))
	a, ok := p.readFrame().(*frames.Attach)
	if !ok || a.Target == nil || a.Target.Address != url {
		t.Fatalf("attach answered with %+v, want the target %q as sent", a, url)
	}

	s := ts.session(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	snd := mustSender(t, s, url)
	if err := snd.Send(ctx, amqp.NewMessage([]byte("by URL")), nil); err != nil {
		t.Fatalf("send to %s: %v", url, err)
	}
	if c := ts.MustCounts(t, "q"); c.Active != 1 {
		t.Fatalf("queue q holds %d messages after a send to %s, want 1", c.Active, url)
	}
	r, err := s.NewReceiver(ctx, "amqp://127.0.0.1/q", &amqp.ReceiverOptions{SettlementMode: amqp.ReceiverSettleModeSecond.Ptr()})
	if err != nil {
		t.Fatalf("receiver on a URL: %v", err)
	}
	m, err := r.Receive(ctx, nil)
	if err != nil || string(m.GetData()) != "by URL" {
		t.Fatalf("receive: %v", err)
	}
	if err := r.AcceptMessage(ctx, m); err != nil {
		t.Fatal(err)
	}
	// The $management node of the entity, by URL.
	mustSender(t, s, "sb://omnibus.example/q/$management")
}

// TestSenderInSettleModeSecondIsSettled: a sender asking for
// rcv-settle-mode second (uamqp's default) gets its mode echoed and every
// transfer answered with a settled disposition, as Service Bus does:
// uamqp completes a send only on settled=true.
func TestSenderInSettleModeSecondIsSettled(t *testing.T) {
	ts := newTestServer(t, nil)
	p := ts.rawDial(t)
	p.open()
	p.writeFrame(0, beginFrame())
	p.readFrame() // begin
	second := frames.ReceiverSettleModeSecond
	at := senderAttach("q")
	at.RcvSettleMode = &second
	p.writeFrame(0, at)
	a, ok := p.readFrame().(*frames.Attach)
	if !ok || a.RcvSettleMode == nil || *a.RcvSettleMode != second {
		t.Fatalf("attach answered %+v, want rcv-settle-mode second echoed", a)
	}
	p.readFrame() // flow with credit
	for i := range 3 {
		id, format := uint32(i), uint32(0)
		p.writeFrame(0, &frames.Transfer{Handle: 0, DeliveryID: &id, DeliveryTag: []byte{byte(i)}, MessageFormat: &format,
			Payload: dataSection(t, 10)})
	}
	settled := map[uint32]bool{}
	for len(settled) < 3 {
		switch f := p.readFrame().(type) {
		case *frames.Disposition:
			if !f.Settled {
				t.Fatalf("disposition %+v is not settled", f)
			}
			if _, ok := f.State.(*frames.Accepted); !ok {
				t.Fatalf("disposition %+v, want accepted", f)
			}
			last := f.First
			if f.Last != nil {
				last = *f.Last
			}
			for id := f.First; id <= last; id++ {
				settled[id] = true
			}
		case *frames.Flow:
		default:
			t.Fatalf("unexpected %T", f)
		}
	}
	if c := ts.MustCounts(t, "q"); c.Active != 3 {
		t.Fatalf("%d messages stored, want 3", c.Active)
	}

	// go-amqp in the same mode sends as well.
	s := ts.session(t)
	snd, err := s.NewSender(t.Context(), "q", &amqp.SenderOptions{RequestedReceiverSettleMode: amqp.ReceiverSettleModeSecond.Ptr()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := snd.Send(ctx, amqp.NewMessage([]byte("x")), nil); err != nil {
		t.Fatalf("go-amqp send in mode second: %v", err)
	}
}

// TestMaxMessageBatchSize: a sender's attach carries
// com.microsoft:max-message-batch-size, the entity's maximum message size
// up to 1 MB, and the Go SDK (v1.11) sizes its batches from it: a batch
// fills up to that size, not to the 2 MB max-message-size of a
// large-message entity, and is accepted.
func TestMaxMessageBatchSize(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "small", MaxMessageSizeInKilobytes: 256})
	ts.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "large", MaxMessageSizeInKilobytes: 2048})
	s := ts.session(t)
	for entity, want := range map[string]uint64{"small": 256 << 10, "large": 1 << 20} {
		snd := mustSender(t, s, entity)
		if got := snd.Properties()[string(propMaxBatchSize)]; got != want {
			t.Errorf("%s: attach property %s = %#v, want %d", entity, propMaxBatchSize, got, want)
		}
	}

	client := ts.sdkClient(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for entity, limit := range map[string]int{"small": 256 << 10, "large": 1 << 20} {
		snd, err := client.NewSender(entity, nil)
		if err != nil {
			t.Fatal(err)
		}
		batch, err := snd.NewMessageBatch(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		body := make([]byte, 10<<10)
		n := 0
		for {
			err := batch.AddMessage(&azservicebus.Message{Body: body}, nil)
			if errors.Is(err, azservicebus.ErrMessageTooLarge) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if n++; n > 1000 {
				t.Fatalf("%s: a batch took %d messages of 10 KiB", entity, n)
			}
		}
		if got := int(batch.NumBytes()); got > limit || got < limit-11<<10 {
			t.Errorf("%s: the SDK's batch filled to %d bytes (%d messages), want just under %d", entity, got, n, limit)
		}
		if err := snd.SendMessageBatch(ctx, batch, nil); err != nil {
			t.Fatalf("%s: sending the full batch: %v", entity, err)
		}
		if c := ts.MustCounts(t, entity); c.Active != int64(n) {
			t.Errorf("%s: %d messages stored, want %d", entity, c.Active, n)
		}
		snd.Close(ctx)
	}
}

// TestManagementAfterSettlement: uamqp defers a message (a disposition
// the client settles itself, not waiting for an answer) and at once asks
// $management for it by sequence number; the request must find it
// deferred, as the frames arrived in that order.
func TestManagementAfterSettlement(t *testing.T) {
	ts := newTestServer(t, nil)
	s := ts.session(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	r, err := s.NewReceiver(ctx, "q", &amqp.ReceiverOptions{Credit: 100,
		SettlementMode: amqp.ReceiverSettleModeFirst.Ptr(), RequestedSenderSettleMode: amqp.SenderSettleModeUnsettled.Ptr()})
	if err != nil {
		t.Fatal(err)
	}
	const node = "q/$management"
	replyTo := node + "-reply-to-test"
	mgmt := mustSender(t, s, node)
	replies, err := s.NewReceiver(ctx, node, &amqp.ReceiverOptions{TargetAddress: replyTo, Credit: 100})
	if err != nil {
		t.Fatal(err)
	}
	const n = 30
	for i := range n {
		ts.MustSend(t, "q", &core.Message{Body: []byte{byte(i)}})
	}
	for i := range n {
		m, err := r.Receive(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		seq, _ := m.Annotations["x-opt-sequence-number"].(int64)
		// Settled by the client in mode first: go-amqp does not wait.
		if err := r.ModifyMessage(ctx, m, &amqp.ModifyMessageOptions{UndeliverableHere: true}); err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprint("req-", i)
		req := &amqp.Message{
			Value:                 map[string]any{"sequence-numbers": []int64{seq}, "receiver-settle-mode": uint32(1)},
			Properties:            &amqp.MessageProperties{MessageID: id, ReplyTo: &replyTo},
			ApplicationProperties: map[string]any{"operation": "com.microsoft:receive-by-sequence-number"},
		}
		if err := mgmt.Send(ctx, req, &amqp.SendOptions{Settled: true}); err != nil {
			t.Fatal(err)
		}
		reply, err := replies.Receive(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if st, _ := reply.ApplicationProperties["statusCode"].(int32); st != 200 {
			t.Fatalf("receive-by-sequence-number %d right after its defer: status %v %v", seq, reply.ApplicationProperties["statusCode"],
				reply.ApplicationProperties["statusDescription"])
		}
	}
}

package amqpserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/go-amqp"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
)

func TestSendSettleModes(t *testing.T) {
	ts := newTestServer(t, nil)
	s := ts.session(t)

	// Mixed mode: one unsettled, one pre-settled delivery.
	mixed := mustSender(t, s, "q")
	mustSend(t, mixed, "unsettled")
	if err := mixed.Send(t.Context(), amqp.NewMessage([]byte("presettled")), &amqp.SendOptions{Settled: true}); err != nil {
		t.Fatalf("pre-settled send: %v", err)
	}
	// Settled mode: the attach must echo snd-settle-mode settled.
	settled, err := s.NewSender(t.Context(), "q", &amqp.SenderOptions{SettlementMode: amqp.SenderSettleModeSettled.Ptr()})
	if err != nil {
		t.Fatalf("attach settled sender: %v", err)
	}
	if err := settled.Send(t.Context(), amqp.NewMessage([]byte("settled-link")), nil); err != nil {
		t.Fatal(err)
	}
	// Unsettled mode with rcv-settle-mode first.
	unsettled, err := s.NewSender(t.Context(), "q", &amqp.SenderOptions{
		SettlementMode:              amqp.SenderSettleModeUnsettled.Ptr(),
		RequestedReceiverSettleMode: amqp.ReceiverSettleModeFirst.Ptr(),
	})
	if err != nil {
		t.Fatalf("attach unsettled sender: %v", err)
	}
	mustSend(t, unsettled, "unsettled-link")

	r := mustReceiver(t, s, "q", amqp.ReceiverSettleModeFirst)
	want := []string{"unsettled", "presettled", "settled-link", "unsettled-link"}
	for _, w := range want {
		if got := string(mustReceive(t, r).GetData()); got != w {
			t.Errorf("got %q, want %q", got, w)
		}
	}
}

func TestSendPipelined(t *testing.T) {
	ts := newTestServer(t, nil)
	snd := mustSender(t, ts.session(t), "q")
	const n = 1000
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			if err := snd.Send(ctx, amqp.NewMessage([]byte(fmt.Sprint(i))), nil); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Send: %v", err)
	}
	if c, _ := ts.Broker.Counts("q"); c.Active != n {
		t.Errorf("active = %d, want %d", c.Active, n)
	}
}

func TestSendMultiFrame(t *testing.T) {
	ts := newTestServer(t, nil)
	s := ts.session(t)
	snd := mustSender(t, s, "q")
	if got := snd.MaxMessageSize(); got != 1024*1024 {
		t.Errorf("max-message-size = %d, want the entity's 1 MiB", got)
	}
	r := mustReceiver(t, s, "q", amqp.ReceiverSettleModeSecond)
	for _, size := range []int{200 << 10, 1<<20 - 1024} {
		body := bytes.Repeat([]byte{byte(size)}, size)
		if err := snd.Send(t.Context(), amqp.NewMessage(body), nil); err != nil {
			t.Fatalf("send %d bytes: %v", size, err)
		}
		m := mustReceive(t, r)
		if !bytes.Equal(m.GetData(), body) {
			t.Errorf("%d-byte body came back as %d bytes", size, len(m.GetData()))
		}
		if err := r.AcceptMessage(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSendTooLargeRejected(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "small", MaxMessageSizeInKilobytes: core.DefaultMaxMessageSizeKB})
	// The client trusts max-message-size, so lie to it: a raw peer sends
	// a 300 KiB delivery in several frames.
	p := ts.rawDial(t)
	p.open()
	p.writeFrame(0, beginFrame())
	p.readFrame()
	p.writeFrame(0, senderAttach("small"))
	a := p.readFrame().(*frames.Attach)
	if a.MaxMessageSize != 256<<10 {
		t.Errorf("max-message-size = %d, want %d", a.MaxMessageSize, 256<<10)
	}
	p.readFrame() // flow with credit
	id, format := uint32(0), uint32(0)
	payload := dataSection(t, 300<<10)
	const chunk = 16 << 10
	p.writeFrame(0, &frames.Transfer{Handle: 0, DeliveryID: &id, DeliveryTag: []byte{1}, MessageFormat: &format, More: true, Payload: payload[:chunk]})
	for off := chunk; off < len(payload); off += chunk {
		end := min(off+chunk, len(payload))
		p.writeFrame(0, &frames.Transfer{Handle: 0, More: end < len(payload), Payload: payload[off:end]})
	}
	d, ok := p.readFrame().(*frames.Disposition)
	if !ok {
		t.Fatalf("got %T, want a disposition", d)
	}
	rej, ok := d.State.(*frames.Rejected)
	if !ok || rej.Error == nil || rej.Error.Condition != frames.CondMessageSizeExceeded {
		t.Fatalf("state = %+v, want rejected message-size-exceeded", d.State)
	}
}

func TestAttachUnknownEntity(t *testing.T) {
	ts := newTestServer(t, nil)
	s := ts.session(t)
	_, err := s.NewSender(t.Context(), "missing", nil)
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae.Condition != amqp.ErrCondNotFound {
		t.Fatalf("attach: %v, want amqp:not-found", err)
	}
	if !strings.Contains(ae.Description, "could not be found") {
		t.Errorf("description %q lacks the Service Bus wording", ae.Description)
	}
	// The session survives a refused attach.
	mustSend(t, mustSender(t, s, "q"), "still fine")
}

func TestSendRejectedByBroker(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "sq", RequiresSession: true})
	snd := mustSender(t, ts.session(t), "sq")
	err := snd.Send(t.Context(), amqp.NewMessage([]byte("no session id")), nil)
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae.Condition != amqp.ErrCondNotAllowed {
		t.Fatalf("send without session id: %v, want rejected amqp:not-allowed", err)
	}
}

// Deliveries that arrive together go to the broker together; one the
// entity refuses must still get its own rejection while the others are
// accepted and stored in the order sent.
func TestSendBurstAnswersEachDelivery(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "sq", RequiresSession: true})
	p := ts.rawDial(t)
	p.open()
	p.writeFrame(0, beginFrame())
	p.readFrame()
	p.writeFrame(0, senderAttach("sq"))
	p.readFrame()                                // attach
	p.readFrame()                                // flow with credit
	sessions := []string{"s", "s", "", "s", "s"} // delivery 2 lacks a session id
	var burst buffer.Buffer
	for i, sid := range sessions {
		var b buffer.Buffer
		m := &frames.Message{Properties: &frames.MessageProperties{GroupID: sid}, Data: [][]byte{[]byte(fmt.Sprint(i))}}
		if err := m.MarshalAMQP(&b); err != nil {
			t.Fatal(err)
		}
		id, format := uint32(i), uint32(0)
		tr := &frames.Transfer{Handle: 0, DeliveryID: &id, DeliveryTag: []byte{byte(i)}, MessageFormat: &format, Payload: b.Bytes()}
		if err := frames.Write(&burst, frames.Frame{Body: tr}); err != nil {
			t.Fatal(err)
		}
	}
	p.writeBytes(burst.Bytes()) // one write: the server reads them in one pass
	outcome := map[uint32]string{}
	for len(outcome) < len(sessions) {
		d, ok := p.readFrame().(*frames.Disposition)
		if !ok {
			continue
		}
		last := d.First
		if d.Last != nil {
			last = *d.Last
		}
		for id := d.First; id <= last; id++ {
			outcome[id] = fmt.Sprintf("%T", d.State)
		}
	}
	for i, sid := range sessions {
		want := "*frames.Accepted"
		if sid == "" {
			want = "*frames.Rejected"
		}
		if outcome[uint32(i)] != want {
			t.Errorf("delivery %d: %s, want %s", i, outcome[uint32(i)], want)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	sl, err := ts.Broker.AcceptSession(ctx, "sq", "s")
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := ts.Broker.Receive(ctx, "sq", core.ReceiveOptions{Max: 10, Session: sl})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range msgs {
		got = append(got, string(m.Body))
	}
	if strings.Join(got, ",") != "0,1,3,4" {
		t.Errorf("stored %v, want 0,1,3,4 in order", got)
	}
}

// TestSendBatchReservedGrowsNoMore checks that a batch given room for the
// size of the last one takes that many deliveries without growing.
func TestSendBatchReservedGrowsNoMore(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are only meaningful without -race (make allocs)")
	}
	parts := make([]partial, 40)
	msg := new(core.Message)
	n := testing.AllocsPerRun(20, func() {
		var b sendBatch
		b.reserve(len(parts))
		for i := range parts {
			b.add(&parts[i], append(b.msgs, msg))
		}
	})
	if n != 3 {
		t.Errorf("a batch of %d deliveries with room reserved allocates %v times, want 3 (its three slices)", len(parts), n)
	}
}

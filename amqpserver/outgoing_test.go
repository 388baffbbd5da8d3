package amqpserver

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
	"unsafe"

	"github.com/Azure/go-amqp"

	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

func TestPeekLockOutcomes(t *testing.T) {
	ts := newTestServer(t, nil)
	s := ts.session(t)
	snd := mustSender(t, s, "q")
	r := mustReceiver(t, s, "q", amqp.ReceiverSettleModeSecond)
	ctx := t.Context()

	// release: available again, delivery not counted.
	mustSend(t, snd, "m")
	m := mustReceive(t, r)
	if err := r.ReleaseMessage(ctx, m); err != nil {
		t.Fatalf("release: %v", err)
	}
	m = mustReceive(t, r)
	if m.Header == nil || m.Header.DeliveryCount != 0 {
		t.Errorf("after release: header %+v, want delivery-count 0", m.Header)
	}

	// modify (abandon): redelivered with the delivery counted, properties merged.
	if err := r.ModifyMessage(ctx, m, &amqp.ModifyMessageOptions{
		DeliveryFailed: true, Annotations: amqp.Annotations{"reason": "retry"},
	}); err != nil {
		t.Fatalf("modify: %v", err)
	}
	m = mustReceive(t, r)
	if m.Header == nil || m.Header.DeliveryCount != 1 {
		t.Errorf("after abandon: header %+v, want delivery-count 1", m.Header)
	}
	if got := m.ApplicationProperties["reason"]; got != "retry" {
		t.Errorf("property reason = %#v, want retry", got)
	}

	// modify undeliverable-here: deferred.
	if err := r.ModifyMessage(ctx, m, &amqp.ModifyMessageOptions{UndeliverableHere: true}); err != nil {
		t.Fatalf("defer: %v", err)
	}
	if c, _ := ts.Broker.Counts("q"); c.Deferred != 1 {
		t.Errorf("deferred = %d, want 1", c.Deferred)
	}

	// reject with the Service Bus dead-letter info: dead-lettered.
	mustSend(t, snd, "dl")
	m = mustReceive(t, r)
	if err := r.RejectMessage(ctx, m, &amqp.Error{
		Condition: "com.microsoft:dead-letter",
		Info:      map[string]any{"DeadLetterReason": "bad", "DeadLetterErrorDescription": "very bad"},
	}); err != nil {
		t.Fatalf("reject: %v", err)
	}
	dlq := mustReceiver(t, s, "q/$DeadLetterQueue", amqp.ReceiverSettleModeSecond)
	m = mustReceive(t, dlq)
	if string(m.GetData()) != "dl" || m.ApplicationProperties["DeadLetterReason"] != "bad" ||
		m.ApplicationProperties["DeadLetterErrorDescription"] != "very bad" {
		t.Errorf("dead-lettered message: body %q props %v", m.GetData(), m.ApplicationProperties)
	}

	// accept: gone.
	if err := dlq.AcceptMessage(ctx, m); err != nil {
		t.Fatalf("accept: %v", err)
	}
	if c, _ := ts.Broker.Counts("q"); c.DeadLetter != 0 || c.Active != 0 {
		t.Errorf("counts after accept: %+v", c)
	}
}

func TestSettleLostLock(t *testing.T) {
	ts := newTestServer(t, nil)
	s := ts.session(t)
	mustSend(t, mustSender(t, s, "q"), "m")
	r := mustReceiver(t, s, "q", amqp.ReceiverSettleModeSecond)
	m := mustReceive(t, r)
	tok, ok := deliveryTagToLockToken(m.DeliveryTag)
	if !ok {
		t.Fatalf("delivery tag %x is not a lock token", m.DeliveryTag)
	}
	// Settled elsewhere (as through $management) first.
	if err := ts.Broker.Settle(t.Context(), "q", tok, core.Outcome{Kind: core.Complete}); err != nil {
		t.Fatalf("core settle by token: %v", err)
	}
	err := r.AcceptMessage(t.Context(), m)
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae.Condition != "com.microsoft:message-lock-lost" {
		t.Fatalf("accept after settle: %v, want message-lock-lost", err)
	}
}

func TestLockSurvivesDetach(t *testing.T) {
	ts := newTestServer(t, nil)
	s := ts.session(t)
	mustSend(t, mustSender(t, s, "q"), "m")
	r := mustReceiver(t, s, "q", amqp.ReceiverSettleModeSecond)
	m := mustReceive(t, r)
	if err := r.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	tok, _ := deliveryTagToLockToken(m.DeliveryTag)
	if err := ts.Broker.Settle(t.Context(), "q", tok, core.Outcome{Kind: core.Complete}); err != nil {
		t.Fatalf("settle by token after detach: %v", err)
	}
}

func TestReceiveAndDelete(t *testing.T) {
	ts := newTestServer(t, nil)
	s := ts.session(t)
	snd := mustSender(t, s, "q")
	for _, b := range []string{"a", "b"} {
		mustSend(t, snd, b)
	}
	r := mustReceiver(t, s, "q", amqp.ReceiverSettleModeFirst)
	for _, want := range []string{"a", "b"} {
		if got := string(mustReceive(t, r).GetData()); got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	if c, _ := ts.Broker.Counts("q"); c.Active != 0 {
		t.Errorf("active = %d after receive-and-delete, want 0", c.Active)
	}
}

func TestDrain(t *testing.T) {
	ts := newTestServer(t, nil)
	s := ts.session(t)
	snd := mustSender(t, s, "q")
	r := mustReceiver(t, s, "q", amqp.ReceiverSettleModeSecond)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()

	// Nothing available: the drain completes at once.
	if err := r.IssueCredit(5); err != nil {
		t.Fatal(err)
	}
	if err := r.DrainCredit(ctx, nil); err != nil {
		t.Fatalf("drain on an empty queue: %v", err)
	}
	// A message sent now is not delivered: the credit is gone.
	mustSend(t, snd, "later")
	if m := r.Prefetched(); m != nil {
		t.Fatalf("message %q delivered without credit", m.GetData())
	}
	// go-amqp drains with link-credit 0: issued credit is revoked. New
	// credit works as before.
	if got := string(mustReceive(t, r).GetData()); got != "later" {
		t.Fatalf("after drain: got %q, want later", got)
	}
}

// TestDrainDeliversAvailable drains the way rhea does, keeping the
// credit in the drain flow: available messages go out first, then the
// flow that ends the drain, with the delivery count advanced.
func TestDrainDeliversAvailable(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.MustSend(t, "q", coretest.Text("a"), coretest.Text("b"))
	p := ts.rawDial(t)
	p.open()
	p.writeFrame(0, beginFrame())
	p.readFrame()
	second := frames.ReceiverSettleModeSecond
	p.writeFrame(0, &frames.Attach{Name: "raw-receiver", Handle: 0, Role: frames.RoleReceiver,
		RcvSettleMode: &second, Source: &frames.Source{Address: "q"}, Target: &frames.Target{}})
	p.readFrame() // attach
	zero, five, next := uint32(0), uint32(5), uint32(0)
	h := uint32(0)
	p.writeFrame(0, &frames.Flow{NextIncomingID: &next, IncomingWindow: 100, OutgoingWindow: 100,
		Handle: &h, DeliveryCount: &zero, LinkCredit: &five, Drain: true})
	var transfers int
	for {
		switch f := p.readFrame().(type) {
		case *frames.Transfer:
			transfers++
		case *frames.Flow:
			if !f.Drain || f.LinkCredit == nil || *f.LinkCredit != 0 || f.DeliveryCount == nil || *f.DeliveryCount != 5 {
				t.Fatalf("drain reply %+v, want drain, credit 0, delivery-count 5", f)
			}
			if transfers != 2 {
				t.Errorf("%d transfers before the drain reply, want 2", transfers)
			}
			return
		}
	}
}

// TestOutgoingWindow holds transfers while the client's session incoming
// window is closed and sends them when a flow reopens it.
func TestOutgoingWindow(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.MustSend(t, "q", coretest.Text("a"), coretest.Text("b"), coretest.Text("c"))
	p := ts.rawDial(t)
	p.open()
	p.writeFrame(0, &frames.Begin{IncomingWindow: 1, OutgoingWindow: 100})
	p.readFrame()
	first := frames.ReceiverSettleModeFirst
	p.writeFrame(0, &frames.Attach{Name: "r", Handle: 0, Role: frames.RoleReceiver,
		RcvSettleMode: &first, Source: &frames.Source{Address: "q"}, Target: &frames.Target{}})
	p.readFrame()
	zero, three, h := uint32(0), uint32(3), uint32(0)
	p.writeFrame(0, &frames.Flow{NextIncomingID: &zero, IncomingWindow: 1, OutgoingWindow: 100,
		Handle: &h, DeliveryCount: &zero, LinkCredit: &three})
	if _, ok := p.readFrame().(*frames.Transfer); !ok {
		t.Fatal("first transfer not sent")
	}
	// With the window closed, an echo request is answered before any
	// further transfer.
	one := uint32(1)
	p.writeFrame(0, &frames.Flow{NextIncomingID: &one, IncomingWindow: 0, OutgoingWindow: 100, Echo: true})
	if f, ok := p.readFrame().(*frames.Flow); !ok {
		t.Fatalf("got %T while the window was closed, want the echoed flow", f)
	}
	// Reopen the window: the other two follow.
	p.writeFrame(0, &frames.Flow{NextIncomingID: &one, IncomingWindow: 10, OutgoingWindow: 100})
	for i := range 2 {
		if _, ok := p.readFrame().(*frames.Transfer); !ok {
			t.Fatalf("transfer %d not sent after the window reopened", i+2)
		}
	}
}

// TestCompleteRangeAnswersEachDelivery accepts three deliveries with one
// disposition (they are completed together) after the lock of the middle
// one was used elsewhere: it alone is rejected with message-lock-lost,
// the other two are accepted and gone.
func TestCompleteRangeAnswersEachDelivery(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.MustSend(t, "q", coretest.Text("a"), coretest.Text("b"), coretest.Text("c"))
	p := ts.rawDial(t)
	p.open()
	p.writeFrame(0, beginFrame())
	p.readFrame()
	second := frames.ReceiverSettleModeSecond
	p.writeFrame(0, &frames.Attach{Name: "r", Handle: 0, Role: frames.RoleReceiver,
		RcvSettleMode: &second, Source: &frames.Source{Address: "q"}, Target: &frames.Target{}})
	p.readFrame() // attach
	zero, three, h := uint32(0), uint32(3), uint32(0)
	p.writeFrame(0, &frames.Flow{NextIncomingID: &zero, IncomingWindow: 100, OutgoingWindow: 100,
		Handle: &h, DeliveryCount: &zero, LinkCredit: &three})
	var tags [][]byte
	for len(tags) < 3 {
		if tr, ok := p.readFrame().(*frames.Transfer); ok {
			tags = append(tags, tr.DeliveryTag)
		}
	}
	tok, ok := deliveryTagToLockToken(tags[1])
	if !ok {
		t.Fatalf("delivery tag %x is not a lock token", tags[1])
	}
	ts.MustSettle(t, "q", tok, core.Outcome{Kind: core.Complete})
	two := uint32(2)
	p.writeFrame(0, &frames.Disposition{Role: frames.RoleReceiver, First: 0, Last: &two, State: &frames.Accepted{}})
	outcome := map[uint32]string{}
	for len(outcome) < 3 {
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
			if rej, ok := d.State.(*frames.Rejected); ok && (rej.Error == nil || rej.Error.Condition != "com.microsoft:message-lock-lost") {
				t.Errorf("delivery %d rejected with %+v, want message-lock-lost", id, rej.Error)
			}
		}
	}
	want := map[uint32]string{0: "*frames.Accepted", 1: "*frames.Rejected", 2: "*frames.Accepted"}
	for id, w := range want {
		if outcome[id] != w {
			t.Errorf("delivery %d: %s, want %s", id, outcome[id], w)
		}
	}
	if c := ts.MustCounts(t, "q"); c.Active != 0 {
		t.Errorf("%d messages left, want 0", c.Active)
	}
}

// A peek-locked delivery's entry, which stays until the client settles,
// lets the transfer's payload go once it is written: a receiver sitting
// on unsettled messages holds their locks, not their bytes.
func TestUnsettledDeliveriesKeepNoPayload(t *testing.T) {
	ts := newTestServer(t, nil)
	s := ts.session(t)
	snd := mustSender(t, s, "q")
	r := mustReceiver(t, s, "q", amqp.ReceiverSettleModeSecond)
	for range 3 {
		mustSend(t, snd, "a message the client never settles")
		mustReceive(t, r)
	}
	ts.srv.mu.Lock()
	var conns []*conn
	for c := range ts.srv.mu.conns {
		conns = append(conns, c)
	}
	ts.srv.mu.Unlock()
	entries, held := 0, 0
	for _, c := range conns {
		done := make(chan struct{})
		if !c.post(func() { // on the connection's goroutine, which owns its sessions
			defer close(done)
			for _, sess := range c.local {
				for _, od := range sess.unsettled {
					entries++
					ld := (*lockedDelivery)(unsafe.Pointer(od)) // od is ld's first field
					if ld.tr.od != od {
						t.Errorf("unsettled entry %p is not a lockedDelivery's", od)
						continue
					}
					held += ld.tr.payload.len()
				}
			}
		}) {
			close(done)
		}
		<-done
	}
	if entries != 3 || held != 0 {
		t.Errorf("%d unsettled entries hold %d payload bytes, want 3 holding none", entries, held)
	}
}

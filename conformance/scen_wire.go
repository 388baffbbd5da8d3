package conformance

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"
)

// Wire-level scenarios with go-amqp: seed 002 ("Settling send
// operations", "Settling receive operations") and amqp.md §5, §8, §11.

func init() {
	register(
		Scenario{Name: "wire-presettled-send", Seed: "002 with a low-level AMQP client Service Bus also accepts presettled transfers", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-basic")
			snd := t.WireSender(t.AMQPSession(), q, true)
			for i := range 3 {
				t.must(snd.Send(t.ctx, wireMessage([]byte(fmt.Sprint(i))), nil), "presettled send %d", i)
			}
			got := t.ReceiveN(t.Receiver(q, "", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete}), 3, 15*time.Second)
			seen := map[string]bool{}
			for _, m := range got {
				seen[string(m.Body)] = true
			}
			if !seen["0"] || !seen["1"] || !seen["2"] {
				t.Fatalf("received %v, want 0, 1 and 2", seen)
			}
		}},
		Scenario{Name: "wire-link-order-kept", Seed: "002 messages are stored in the order their transfers arrive on one link (presettled and pipelined)", Protocol: AMQP,
			Detects: []Detection{{FaultBreakFIFO, "order"}}, Run: func(t *T) {
				// One link in mixed mode (go-amqp's default): presettled
				// transfers, then unsettled ones. Order across two links
				// is not promised (core/README.md, Decisions).
				q := t.Queue("cf-basic")
				snd := t.WireSender(t.AMQPSession(), q, false)
				var want []string
				for i := range 10 {
					want = append(want, fmt.Sprint("p", i))
					t.must(snd.Send(t.ctx, wireMessage([]byte(want[i])), &amqp.SendOptions{Settled: true}), "presettled send")
				}
				var receipts []amqp.SendReceipt
				for i := range 10 {
					want = append(want, fmt.Sprint("u", i))
					rc, err := snd.SendWithReceipt(t.ctx, wireMessage([]byte(want[len(want)-1])), nil)
					t.must(err, "pipelined send")
					receipts = append(receipts, rc)
				}
				for _, rc := range receipts {
					st, err := rc.Wait(t.ctx)
					t.must(err, "send outcome")
					if _, ok := st.(*amqp.StateAccepted); !ok {
						t.Fatalf("send outcome %T, want accepted", st)
					}
				}
				r := t.WireReceiver(t.AMQPSession(), q, true)
				t.must(r.IssueCredit(uint32(len(want))), "credit")
				var got []string
				for range want {
					got = append(got, bodyOf(t.wireReceive(r, 10*time.Second)))
				}
				t.Check("order")
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("stored order %v, want the transfer order %v", got, want)
				}
			}},
		Scenario{Name: "wire-pipelined-500-sends", Seed: "002 a sender may put many messages on the wire without waiting; each completes when accepted and stored", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-basic")
			snd := t.WireSender(t.AMQPSession(), q, false)
			const n = 500
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = snd.Send(t.ctx, wireMessage([]byte(fmt.Sprint(i))), nil)
				}()
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("send %d of %d: %v", i, n, err)
				}
			}
			r := t.WireReceiver(t.AMQPSession(), q, true)
			t.must(r.IssueCredit(n), "credit")
			seen := map[string]bool{}
			for len(seen) < n {
				seen[bodyOf(t.wireReceive(r, 15*time.Second))] = true
			}
		}},
		Scenario{Name: "wire-credit-settle-out-of-order", Seed: "amqp.md §8 a receiver grants credit and settles deliveries in any order", Protocol: AMQP,
			Detects: []Detection{{FaultIgnoreComplete, "all three gone"}}, Run: func(t *T) {
				q := t.Queue("cf-basic")
				t.Send(q, Text("a"), Text("b"), Text("c"))
				r := t.WireReceiver(t.AMQPSession(), q, false)
				t.must(r.IssueCredit(3), "credit")
				var msgs []*amqp.Message
				for range 3 {
					msgs = append(msgs, t.wireReceive(r, 10*time.Second))
				}
				for _, i := range []int{2, 0, 1} {
					t.must(r.AcceptMessage(t.ctx, msgs[i]), "accepting delivery %d out of order", i)
				}
				t.Check("all three gone")
				peeked, err := t.Receiver(q, "", nil).PeekMessages(t.ctx, 10, nil)
				t.must(err, "peek")
				if len(peeked) != 0 {
					t.Fatalf("%d messages left after accepting all three out of order", len(peeked))
				}
			}},
		Scenario{Name: "wire-no-delivery-without-credit", Seed: "amqp.md §8 the broker does not hand out messages without link credit", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-basic")
			t.Send(q, Text("x"))
			r := t.WireReceiver(t.AMQPSession(), q, false)
			ctx, cancel := context.WithTimeout(t.ctx, 2*time.Second)
			m, err := r.Receive(ctx, nil)
			cancel()
			if err == nil {
				t.Fatalf("received %q on a link without credit", bodyOf(m))
			}
			t.must(r.IssueCredit(1), "credit")
			if m := t.wireReceive(r, 10*time.Second); wireDeliveryCount(m) != 0 {
				t.Errorf("first delivery carries header delivery-count %d, want 0 (prior attempts)", wireDeliveryCount(m))
			}
		}},
		Scenario{Name: "wire-drain-empty-prompt", Seed: "amqp.md §8 a drain on an empty queue is answered promptly with credit 0", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-basic")
			r := t.WireReceiver(t.AMQPSession(), q, false)
			t.must(r.IssueCredit(10), "credit")
			start := time.Now()
			ctx, cancel := context.WithTimeout(t.ctx, 5*time.Second)
			defer cancel()
			t.must(r.DrainCredit(ctx, nil), "drain")
			if d := time.Since(start); d > time.Second {
				t.Fatalf("drain answered after %s, want promptly (< 1 s)", d)
			}
		}},
		Scenario{Name: "wire-drain-zeroes-credit", Seed: "amqp.md §8 a drain sends what is available up to the credit, then leaves the link without credit", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-basic")
			t.Send(q, Text("1"), Text("2"))
			r := t.WireReceiver(t.AMQPSession(), q, true)
			t.must(r.IssueCredit(5), "credit")
			// Receive one first: go-amqp folds credit issued just before a
			// drain into the drain flow as link-credit 0, so make sure the
			// credit reached the broker.
			if got := bodyOf(t.wireReceive(r, 5*time.Second)); got != "1" {
				t.Fatalf("first message %q, want 1", got)
			}
			ctx, cancel := context.WithTimeout(t.ctx, 5*time.Second)
			defer cancel()
			t.must(r.DrainCredit(ctx, nil), "drain")
			if got := bodyOf(t.wireReceive(r, 5*time.Second)); got != "2" {
				t.Errorf("after drain got %q, want 2", got)
			}
			t.Send(q, Text("3"))
			ctx2, cancel2 := context.WithTimeout(t.ctx, 2*time.Second)
			defer cancel2()
			if m, err := r.Receive(ctx2, nil); err == nil {
				t.Fatalf("received %q after the drain used up the credit", bodyOf(m))
			}
		}},
		Scenario{Name: "wire-multiframe-1mb", Seed: "amqp.md §11 a message larger than the frame size travels in several transfer frames", Protocol: AMQP, Run: func(t *T) {
			q := t.largeQueue()
			body := make([]byte, 1<<20)
			for i := range body {
				body[i] = byte(i*31 + i>>8)
			}
			s := t.AMQPSession()
			snd := t.WireSender(s, q, false)
			if snd.MaxMessageSize() != 0 && snd.MaxMessageSize() < uint64(len(body)) {
				t.Skipf("the endpoint's sender link allows %d bytes", snd.MaxMessageSize())
			}
			t.must(snd.Send(t.ctx, wireMessage(body), nil), "sending 1 MiB")
			r := t.WireReceiver(s, q, false)
			t.must(r.IssueCredit(1), "credit")
			m := t.wireReceive(r, 20*time.Second)
			if got := []byte(bodyOf(m)); !bytes.Equal(got, body) {
				t.Fatalf("1 MiB body changed in transit (got %d bytes)", len(got))
			}
			t.must(r.AcceptMessage(t.ctx, m), "accept")
		}},
		Scenario{Name: "wire-rcv-settle-first-deletes", Seed: "002 ReceiveAndDelete (rcv-settle-mode first, presettled transfers): the message is consumed when sent", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-basic")
			t.Send(q, Text("once"))
			r := t.WireReceiver(t.AMQPSession(), q, true)
			t.must(r.IssueCredit(1), "credit")
			if m := t.wireReceive(r, 10*time.Second); bodyOf(m) != "once" {
				t.Fatalf("body %q", bodyOf(m))
			}
			t.ReceiveNone(t.Receiver(q, "", nil), 2*time.Second, "a presettled delivery must have removed the message")
		}},
		Scenario{Name: "wire-released-no-count", Seed: "amqp.md §5.1 the released outcome unlocks without incrementing DeliveryCount", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-basic")
			t.Send(q, Text("x"))
			r := t.WireReceiver(t.AMQPSession(), q, false)
			t.must(r.IssueCredit(1), "credit")
			t.must(r.ReleaseMessage(t.ctx, t.wireReceive(r, 10*time.Second)), "release")
			m := t.ReceiveN(t.Receiver(q, "", nil), 1, 10*time.Second)[0]
			if m.DeliveryCount != 1 {
				t.Fatalf("after release DeliveryCount %d, want 1", m.DeliveryCount)
			}
		}},
		Scenario{Name: "wire-modified-failed-counts", Seed: "amqp.md §5.1 modified (abandon) unlocks and increments DeliveryCount", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-basic")
			t.Send(q, Text("x"))
			r := t.WireReceiver(t.AMQPSession(), q, false)
			t.must(r.IssueCredit(2), "credit")
			t.must(r.ModifyMessage(t.ctx, t.wireReceive(r, 10*time.Second), &amqp.ModifyMessageOptions{DeliveryFailed: true}), "modify")
			m := t.wireReceive(r, 10*time.Second)
			if wireDeliveryCount(m) != 1 {
				t.Fatalf("after modified the header delivery-count is %d, want 1 (one prior attempt)", wireDeliveryCount(m))
			}
		}},
		Scenario{Name: "wire-modified-undeliverable-defers", Seed: "amqp.md §5.1 modified{undeliverable-here} defers the message", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-basic")
			t.Send(q, Text("later"))
			r := t.WireReceiver(t.AMQPSession(), q, false)
			t.must(r.IssueCredit(1), "credit")
			m := t.wireReceive(r, 10*time.Second)
			seq, err := sequenceOf(m)
			t.must(err, "sequence number")
			t.must(r.ModifyMessage(t.ctx, m, &amqp.ModifyMessageOptions{UndeliverableHere: true}), "modify undeliverable-here")
			sr := t.Receiver(q, "", nil)
			t.ReceiveNone(sr, 2*time.Second, "a deferred message must not be received normally")
			got, err := sr.ReceiveDeferredMessages(t.ctx, []int64{seq}, nil)
			t.must(err, "receive deferred")
			if len(got) != 1 || got[0].State != azservicebus.MessageStateDeferred {
				t.Fatalf("receive-by-sequence-number got %d messages (state %v), want 1 deferred", len(got), stateOf(got))
			}
		}},
		Scenario{Name: "wire-rejected-deadletters", Seed: "amqp.md §5.1 rejected{com.microsoft:dead-letter} moves the message to the DLQ with its reason", Protocol: AMQP,
			Detects: []Detection{{FaultDropDeadLetters, "in the dead-letter subqueue"}}, Run: func(t *T) {
				q := t.Queue("cf-basic")
				t.Send(q, Text("bad"))
				r := t.WireReceiver(t.AMQPSession(), q, false)
				t.must(r.IssueCredit(1), "credit")
				t.must(r.RejectMessage(t.ctx, t.wireReceive(r, 10*time.Second), &amqp.Error{
					Condition: "com.microsoft:dead-letter",
					Info:      map[string]any{"DeadLetterReason": "wire", "DeadLetterErrorDescription": "raw reject"},
				}), "reject")
				t.Check("in the dead-letter subqueue")
				d := t.ReceiveN(t.DLQ(q, ""), 1, 10*time.Second)[0]
				if deref(d.DeadLetterReason) != "wire" || deref(d.DeadLetterErrorDescription) != "raw reject" {
					t.Fatalf("DLQ reason %v description %v", deref(d.DeadLetterReason), deref(d.DeadLetterErrorDescription))
				}
			}},
	)
}

// largeQueue returns a queue that accepts messages above 1 MiB, skipping
// when the endpoint refuses MaxMessageSizeInKilobytes 2048 (Standard
// tier).
func (t *T) largeQueue() string {
	q, err := t.tryQueue("cf-large")
	if err != nil {
		t.Skipf("the endpoint refuses MaxMessageSizeInKilobytes 2048: %v", err)
	}
	return q
}

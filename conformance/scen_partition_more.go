package conformance

import (
	"fmt"
	"slices"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// Partitioned queues where a cluster spreads them: each partition may be
// held by another data group, led by another node. Against a cluster
// (Target.Nodes) the scenarios' senders and their other clients are on
// different nodes, and these scenarios use the two clients on purpose:
// a deferred message, a peek, a session lock and a session's state must
// reach the partition that holds them, whichever node the client is on.

// otherClient is a client on another node than [T.Client]'s against a
// cluster (the senders' client); against one endpoint, the same client.
func (t *T) otherClient() *azservicebus.Client { return t.sendClient() }

func init() {
	register(
		Scenario{Name: "partition-deferred-by-sequence", Seed: partitionDoc + "a deferred message is received again by its sequence number, whichever partition holds it (Message deferral)", Protocol: AMQP,
			Detects: []Detection{{FaultIgnoreComplete, "gone"}}, Run: func(t *T) {
				q := t.Queue("cf-partitioned")
				var keys []string
				for i := range 12 {
					keys = append(keys, fmt.Sprint("d", i))
				}
				n := t.keyedMessages(q, keys, 1)
				r := t.Receiver(q, "", nil)
				got := t.ReceiveN(r, n, 10*time.Second)
				var seqs []int64
				parts := map[int64]bool{}
				for _, m := range got {
					t.must(r.DeferMessage(t.ctx, m, nil), "defer %s", m.Body)
					seqs = append(seqs, *m.SequenceNumber)
					parts[partitionOf(m)] = true
				}
				if len(parts) < 2 {
					t.Fatalf("12 partition keys used %d partition(s)", len(parts))
				}
				t.Check("received by sequence number")
				back, err := r.ReceiveDeferredMessages(t.ctx, seqs, nil)
				t.must(err, "receive deferred messages")
				var backSeqs []int64
				for _, m := range back {
					backSeqs = append(backSeqs, *m.SequenceNumber)
				}
				slices.Sort(seqs)
				slices.Sort(backSeqs)
				if !slices.Equal(seqs, backSeqs) {
					t.Fatalf("deferred %v, received back %v", seqs, backSeqs)
				}
				for _, m := range back {
					t.Complete(r, m)
				}
				t.Check("gone")
				t.expectNothingStored(r, "every deferred message was completed")
			}},
		Scenario{Name: "partition-peek-every-message", Seed: partitionDoc + "peek pages through the messages of every partition, each once (Message browsing)", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-partitioned")
			var keys []string
			for i := range 12 {
				keys = append(keys, fmt.Sprint("p", i))
			}
			n := t.keyedMessages(q, keys, 1)
			r := t.Receiver(q, "", nil)
			seen := map[string]int{}
			var from int64
			for page := 0; page < 20; page++ {
				got, err := r.PeekMessages(t.ctx, 5, &azservicebus.PeekMessagesOptions{FromSequenceNumber: to.Ptr(from)})
				t.must(err, "peek")
				if len(got) == 0 {
					break
				}
				for _, m := range got {
					seen[string(m.Body)]++
					from = max(from, *m.SequenceNumber+1)
				}
			}
			if len(seen) != n {
				t.Errorf("peeked %d distinct messages of %d: %v", len(seen), n, seen)
			}
			for b, c := range seen {
				if c != 1 {
					t.Errorf("%s peeked %d times", b, c)
				}
			}
		}},
		Scenario{Name: "partition-session-exclusive", Seed: partitionDoc + "a session of a partitioned queue held by one receiver cannot be accepted by another, on another connection (com.microsoft:session-cannot-be-locked)", Protocol: AMQP,
			Detects: []Detection{{FaultShareSessionLocks, "a second accept is refused"}}, Run: func(t *T) {
				q := t.Queue("cf-partitioned-session")
				t.Send(q, inSession("held", "x"))
				t.acceptSession(q, "held")
				ctx, cancel := contextWithTimeout(t, 10*time.Second)
				defer cancel()
				t.Check("a second accept is refused")
				r2, err := t.otherClient().AcceptSessionForQueue(ctx, q, "held", nil)
				switch {
				case err == nil:
					_ = r2.Close(t.ctx)
					t.Fatalf("a receiver on another connection accepted a locked session")
				case ctx.Err() != nil:
					t.Abortf("accepting a locked session: no answer within 10 s: %v", err)
				case amqpCondition(err) != "com.microsoft:session-cannot-be-locked":
					t.Fatalf("accepting a locked session: %v, want com.microsoft:session-cannot-be-locked", err)
				}
			}},
		Scenario{Name: "partition-session-resumed", Seed: partitionDoc + "a session of a partitioned queue keeps its state and the order of its remaining messages when accepted again, on another connection", Protocol: AMQP,
			Detects: []Detection{{FaultBreakFIFO, "order"}}, Run: func(t *T) {
				q := t.Queue("cf-partitioned-session")
				for i := range 4 {
					t.Send(q, inSession("resume", fmt.Sprint("m", i)))
				}
				r := t.acceptSession(q, "resume")
				first := t.ReceiveN(r, 2, 10*time.Second)
				for _, m := range first {
					t.Complete(r, m)
				}
				t.must(r.SetSessionState(t.ctx, []byte("half"), nil), "set session state")
				t.must(r.Close(t.ctx), "close the session")
				r2, err := t.otherClient().AcceptSessionForQueue(t.ctx, q, "resume", nil)
				t.must(err, "accept the session again on another connection")
				t.Cleanup(func() { _ = r2.Close(t.ctx) })
				st, err := r2.GetSessionState(t.ctx, nil)
				t.must(err, "get session state")
				if string(st) != "half" {
					t.Errorf("session state %q, want half", st)
				}
				rest := t.ReceiveN(r2, 2, 10*time.Second)
				t.Check("order")
				t.expectBodies(append(first, rest...), "m0", "m1", "m2", "m3")
			}},
	)
}

package soak

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/go-amqp"

	"github.com/omnibusmq/omnibus/cmd/omnibus/bench"
)

// settleTimeout bounds the wait for the broker's answer to a completion
// while it is up; a kill ends the wait sooner (the connection fails).
const settleTimeout = 30 * time.Second

// load is the soak's senders and receivers and what they share.
type load struct {
	c      *Config
	b      *broker
	ledger *bench.Ledger
	life   *lifeClock

	lastRecv atomic.Int64 // unix nanos of the latest delivery
	inFlight atomic.Int64 // deliveries received whose completion is not done yet
	// Completions being sent or awaiting their answer, and how many were
	// ever started: at a kill they bound how many completions the broker
	// may have applied without the answer reaching us (see Run).
	settling     atomic.Int64
	settleStarts atomic.Int64

	senders   []*endpoint[*amqp.Sender]
	receivers []receiver
}

// A receiver is a peek-lock receiver connection on one stream: the
// queue, or one subscription of the topic.
type receiver struct {
	ep     *endpoint[*amqp.Receiver]
	stream int
}

func newLoad(c *Config, b *broker, l *bench.Ledger, life *lifeClock) *load {
	ld := &load{c: c, b: b, ledger: l, life: life}
	target := queueName
	if c.Subscriptions > 0 {
		target = topicName
	}
	for range c.Senders {
		ld.senders = append(ld.senders, &endpoint[*amqp.Sender]{dial: b.dial, life: life,
			attach: func(ctx context.Context, s *amqp.Session) (*amqp.Sender, error) {
				return s.NewSender(ctx, target, nil)
			}})
	}
	for stream := range max(c.Subscriptions, 1) {
		source := queueName
		if c.Subscriptions > 0 {
			source = topicName + "/Subscriptions/" + subscriptionName(stream)
		}
		for range c.Receivers {
			ep := &endpoint[*amqp.Receiver]{dial: b.dial, life: life,
				attach: func(ctx context.Context, s *amqp.Session) (*amqp.Receiver, error) {
					// Peek-lock (unsettled deliveries) with completions the
					// broker answers (receiver-settle-mode second), as the
					// Azure SDKs receive.
					return s.NewReceiver(ctx, source, &amqp.ReceiverOptions{
						Credit:                    int32(c.Credit),
						RequestedSenderSettleMode: amqp.SenderSettleModeUnsettled.Ptr(),
						SettlementMode:            amqp.ReceiverSettleModeSecond.Ptr(),
					})
				}}
			ld.receivers = append(ld.receivers, receiver{ep: ep, stream: stream})
		}
	}
	return ld
}

// send runs every sender until claim ends, then waits for the outcomes
// of the sends in flight (ctx bounds that wait).
func (ld *load) send(claim, ctx context.Context) {
	payload := make([]byte, ld.c.Size)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	var wg sync.WaitGroup
	for _, ep := range ld.senders {
		for range ld.c.Inflight {
			wg.Go(func() { ld.sendLoop(claim, ctx, ep, payload) })
		}
	}
	wg.Wait()
}

func (ld *load) sendLoop(claim, ctx context.Context, ep *endpoint[*amqp.Sender], payload []byte) {
	runID := ld.ledger.RunID()
	for claim.Err() == nil {
		s, gen, err := ep.get(claim)
		if err != nil {
			return
		}
		lf := ld.life.current()
		seq := ld.ledger.Next("")
		msg := amqp.NewMessage(payload)
		msg.Header = &amqp.MessageHeader{Durable: true}
		msg.ApplicationProperties = bench.Stamp(runID, seq, time.Now())
		ld.ledger.Sent(seq)
		receipt, err := s.SendWithReceipt(ctx, msg, nil)
		if err != nil {
			ld.ledger.SendFailed(seq)
			ep.broken(gen)
			continue
		}
		state, err := receipt.Wait(ctx)
		if _, accepted := state.(*amqp.StateAccepted); err == nil && accepted {
			ld.ledger.Acked(seq)
			lf.acked()
			continue
		}
		// Rejected, or no answer: the message may or may not be stored.
		ld.ledger.SendFailed(seq)
		if err != nil {
			ep.broken(gen)
		}
	}
}

// delivery is a received message waiting for its completion.
type delivery struct {
	r   *amqp.Receiver
	gen int
	msg *amqp.Message
	seq uint64
	nth uint32 // which delivery of the message this is (bench.Ledger.Delivered)
}

// receive runs every receiver until ctx ends.
func (ld *load) receive(ctx context.Context) {
	var wg sync.WaitGroup
	for _, rc := range ld.receivers {
		ch := make(chan delivery, ld.c.Credit)
		wg.Go(func() {
			defer close(ch)
			ld.receiveLoop(ctx, rc, ch)
		})
		for range ld.c.Settlers {
			wg.Go(func() { ld.settleLoop(rc, ch) })
		}
	}
	wg.Wait()
}

func (ld *load) receiveLoop(ctx context.Context, rc receiver, out chan<- delivery) {
	ep := rc.ep
	for {
		r, gen, err := ep.get(ctx)
		if err != nil {
			return
		}
		msg, err := r.Receive(ctx, nil)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			ep.broken(gen)
			continue
		}
		runID, seq, _, _ := bench.ReadStamp(msg.ApplicationProperties)
		_, nth := ld.ledger.Delivered(rc.stream, bench.Delivery{RunID: runID, Seq: seq})
		ld.lastRecv.Store(time.Now().UnixNano())
		ld.inFlight.Add(1)
		out <- delivery{r: r, gen: gen, msg: msg, seq: seq, nth: nth}
	}
}

// settleLoop completes deliveries and records what the broker answered:
// confirmed, refused (an AMQP error in the answer: the lock was lost, the
// message goes back), or nothing (the connection failed: the completion
// may or may not have been applied).
func (ld *load) settleLoop(rc receiver, in <-chan delivery) {
	for d := range in {
		ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
		ld.settling.Add(1) // before settleStarts: see completionsAtKill
		ld.settleStarts.Add(1)
		err := d.r.AcceptMessage(ctx, d.msg)
		ld.settling.Add(-1)
		cancel()
		if _, refused := err.(*amqp.Error); err == nil || refused {
			if err == nil {
				ld.ledger.Completed(rc.stream, d.seq, d.nth)
			} else {
				ld.ledger.Released(rc.stream, d.seq)
			}
		} else {
			ld.ledger.CompletionUnanswered(rc.stream, d.seq)
			rc.ep.broken(d.gen)
		}
		ld.inFlight.Add(-1)
	}
}

// completionsAtKill kills the broker with kill and returns how many
// completions were being sent or awaited at any moment around it: an
// upper bound of those the broker applied without its answer arriving.
// It reads settleStarts before settling, which settleLoop increments in
// the other order, so no completion under way escapes both counts.
func (ld *load) completionsAtKill(kill func() error) (int64, error) {
	starts := ld.settleStarts.Load()
	under := ld.settling.Load()
	err := kill()
	return under + ld.settleStarts.Load() - starts, err
}

// close closes every client connection.
func (ld *load) close() {
	for _, ep := range ld.senders {
		ep.close()
	}
	for _, rc := range ld.receivers {
		rc.ep.close()
	}
}

// reconnects counts the connections clients made again after a failure.
func (ld *load) reconnects() int {
	n := 0
	for _, ep := range ld.senders {
		n += ep.reconnects()
	}
	for _, rc := range ld.receivers {
		n += rc.ep.reconnects()
	}
	return n
}

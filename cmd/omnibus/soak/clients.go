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
	// fault follows the sends in flight when a disk fault is injected.
	fault faultWatch

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
		before := ld.fault.sending()
		receipt, err := s.SendWithReceipt(ctx, msg, nil)
		if err != nil {
			ld.fault.answered(before, nil, err)
			ld.ledger.SendFailed(seq)
			ep.broken(gen)
			continue
		}
		state, err := receipt.Wait(ctx)
		ld.fault.answered(before, state, err)
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

// The AMQP conditions a send in flight may get when the disk fails: the
// outcome is unknown (Service Bus's ServiceTimeout), or the send was
// refused, nothing stored.
const (
	condTimeout    = "com.microsoft:timeout"
	condServerBusy = "com.microsoft:server-busy"
)

// faultWatch follows the sends in flight when a disk fault takes effect,
// and what each of them got. Sends are counted by generation: the one
// current when the fault was injected lasts until the first answer that
// shows the fault (outcome unknown, or refused); every send of it must be
// answered. Sends started after that are refused at once and not followed.
type faultWatch struct {
	gen     atomic.Int64
	pending [2]atomic.Int64 // sends not yet answered, by generation (mod 2)
	on      atomic.Bool     // a fault was injected, and its count is open
	faulted atomic.Int64    // the generation of the sends it follows
	// What the sends it follows got.
	stored, unknown, refused, other atomic.Int64
}

// sending records a send starting and returns its generation.
func (w *faultWatch) sending() int64 {
	g := w.gen.Load()
	w.pending[g&1].Add(1)
	return g
}

// answered records the answer of a send of generation g.
func (w *faultWatch) answered(g int64, state amqp.DeliveryState, err error) {
	if w.on.Load() && g == w.faulted.Load() {
		rej, _ := state.(*amqp.StateRejected)
		cond := amqp.ErrCond("")
		if rej != nil && rej.Error != nil {
			cond = rej.Error.Condition
		}
		_, accepted := state.(*amqp.StateAccepted)
		switch {
		case err == nil && accepted:
			w.stored.Add(1)
		case err == nil && cond == condTimeout:
			w.unknown.Add(1)
			w.gen.CompareAndSwap(g, g+1) // the fault took effect
		case err == nil && cond == condServerBusy:
			w.refused.Add(1)
			w.gen.CompareAndSwap(g, g+1)
		default:
			w.other.Add(1)
		}
	}
	w.pending[g&1].Add(-1)
}

// begin opens the count of a fault about to be injected.
func (w *faultWatch) begin() {
	w.stored.Store(0)
	w.unknown.Store(0)
	w.refused.Store(0)
	w.other.Store(0)
	w.faulted.Store(w.gen.Load())
	w.on.Store(true)
}

// waitAnswered waits, up to timeout, until the fault took effect and
// every send of its generation was answered. It returns how many were
// not.
func (w *faultWatch) waitAnswered(timeout time.Duration) int64 {
	deadline := time.Now().Add(timeout)
	g := w.faulted.Load()
	for (w.gen.Load() == g || w.pending[g&1].Load() > 0) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	return w.pending[g&1].Load()
}

// end closes the fault's count, leaving the generation it followed.
func (w *faultWatch) end() {
	w.on.Store(false)
	w.gen.CompareAndSwap(w.faulted.Load(), w.faulted.Load()+1)
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
		// A completion answered with the outcome unknown (the disk failed
		// under it) may or may not have been applied, as one unanswered.
		ae, refused := err.(*amqp.Error)
		if refused && ae.Condition == condTimeout {
			ld.ledger.CompletionUnanswered(rc.stream, d.seq)
		} else if err == nil || refused {
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

// diskFault fails the broker's disk under load (b.failDisk), waits until
// every send in flight then has been answered, and stops the broker with
// SIGTERM. It returns what it saw and how many completions were under way
// around it (see completionsAtKill).
func (ld *load) diskFault(b *broker, timeout time.Duration) (DiskFault, int64, error) {
	var df DiskFault
	w := &ld.fault
	under, err := ld.completionsAtKill(func() error {
		w.begin()
		if err := b.failDisk(); err != nil {
			return err
		}
		df.Unanswered = w.waitAnswered(timeout)
		var err error
		df.Stop, df.ExitStatus, err = b.terminate(timeout)
		return err
	})
	df.Stored, df.Unknown, df.Refused, df.Other = w.stored.Load(), w.unknown.Load(), w.refused.Load(), w.other.Load()
	df.InFlight = df.Stored + df.Unknown + df.Refused + df.Other + df.Unanswered
	w.end()
	return df, under, err
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

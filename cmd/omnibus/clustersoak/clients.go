package clustersoak

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/omnibusmq/omnibus/cmd/omnibus/bench"
)

// opTimeout bounds one SDK operation while the cluster is up; a failover
// ends it sooner (the connection is reset).
const opTimeout = 20 * time.Second

// load is the soak's SDK clients and what they share.
type load struct {
	c      *Config
	conn   string // the connection string, through the balancer
	ledger *bench.Ledger

	acks     atomic.Int64
	lastRecv atomic.Int64 // unix nanos of the latest delivery
	inFlight atomic.Int64 // deliveries whose completion is not done yet
	// Completions being sent or awaiting their answer, and how many were
	// ever started: at a failover they bound how many completions the
	// broker may have applied without the answer reaching the receiver.
	settling, settleStarts atomic.Int64
	// acked records when sends were acknowledged during a failover
	// (failtime.go).
	acked      ackTimes
	reconnects atomic.Int64
	// hung counts completions that got no answer at all within
	// opTimeout (the SDK gave up): not a loss, but a client left waiting.
	// hungDeadConn counts those of them the SDK kept retrying on a link
	// whose connection had died (sdkconnlost.go): they never reached a
	// broker.
	hung, hungDeadConn atomic.Int64
	connLost           *sdkConnLost
	// failing counts the failovers under way (from just before the fault
	// until the node is back): a completion refused as lock lost then
	// may have been applied (its outcome was unknown to the broker).
	failing atomic.Int32
	// faults counts the failovers begun: a completion during which one
	// began was under way at a failover even if none is at its start or
	// its end (a fault a moment after it was sent, the node back before
	// its answer).
	faults atomic.Int64
	trace  *trace // every delivery and completion outcome (nil: none)
	// order checks the partitioned queue's per-key order (pkeys.go).
	order *orderBook
	// releases counts what the SDK's receivers gave back unseen, and
	// sdkReleased how much of it the session receiver put down
	// (sdkrelease.go).
	releases    *sdkReleases
	sdkReleased atomic.Int64
}

// partitioned says whether client i (sender or receiver) uses the
// partitioned queue: the odd ones, with data groups.
func (ld *load) partitioned(i int) bool { return ld.c.Groups > 0 && i%2 == 1 }

func queueFor(partitioned bool) string {
	if partitioned {
		return partitionedQueueName
	}
	return queueName
}

// client is one SDK client with its sender or receiver, replaced (a new
// generation) when an operation on it fails.
type client[T any] struct {
	ld *load
	id int // a receiver's number, for the trace
	// partitioned: a receiver of the partitioned queue.
	partitioned bool
	open        func(*azservicebus.Client) (T, error)

	mu  sync.Mutex // guards the fields below
	cl  *azservicebus.Client
	v   T
	gen int
	ok  bool
}

// get returns the current sender or receiver, making a client first if
// the last one failed.
func (c *client[T]) get() (T, int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ok {
		return c.v, c.gen, nil
	}
	var zero T
	cl, err := azservicebus.NewClientFromConnectionString(c.ld.conn, &azservicebus.ClientOptions{
		RetryOptions: azservicebus.RetryOptions{MaxRetries: -1}})
	if err != nil {
		return zero, 0, err
	}
	v, err := c.open(cl)
	if err != nil {
		cl.Close(context.Background())
		return zero, 0, err
	}
	if c.gen > 0 {
		c.ld.reconnects.Add(1)
	}
	c.cl, c.v, c.ok = cl, v, true
	c.gen++
	return v, c.gen, nil
}

// broken retires generation gen's client.
func (c *client[T]) broken(gen int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ok && c.gen == gen {
		c.ok = false
		go c.cl.Close(context.Background())
	}
}

func (c *client[T]) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ok {
		c.ok = false
		c.cl.Close(context.Background())
	}
}

// send runs the senders until claim ends, each with Inflight sends at
// once. A send that fails is counted failed, and the sender takes a new
// client.
func (ld *load) send(claim context.Context, senders int) {
	payload := make([]byte, ld.c.Size)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	var wg sync.WaitGroup
	var clients []*client[*azservicebus.Sender]
	for i := range senders {
		partitioned := ld.partitioned(i)
		sc := &client[*azservicebus.Sender]{ld: ld, open: func(cl *azservicebus.Client) (*azservicebus.Sender, error) {
			return cl.NewSender(queueFor(partitioned), nil)
		}}
		clients = append(clients, sc)
		for j := range ld.c.Inflight {
			keys := ""
			if partitioned {
				keys = fmt.Sprintf("s%d.%d.", i, j) // this loop's own keys
			}
			wg.Go(func() { ld.sendLoop(claim, sc, payload, keys, "") })
		}
	}
	if ld.c.Groups > 0 && ld.c.Sessions > 0 {
		sc := &client[*azservicebus.Sender]{ld: ld, open: func(cl *azservicebus.Client) (*azservicebus.Sender, error) {
			return cl.NewSender(sessionQueueName, nil)
		}}
		clients = append(clients, sc)
		for j := range ld.c.Sessions {
			wg.Go(func() { ld.sendLoop(claim, sc, payload, "", sessionOf(j)) })
		}
	}
	wg.Wait()
	for _, sc := range clients {
		sc.close()
	}
}

// sendLoop sends one message at a time; to the partitioned queue when
// keys is not empty, each with a partition key keys+"0" … keys+"3" in
// turn; to the session queue in session when that is not empty.
func (ld *load) sendLoop(claim context.Context, sc *client[*azservicebus.Sender], payload []byte, keys, session string) {
	runID := ld.ledger.RunID()
	for n := 0; claim.Err() == nil; n++ {
		s, gen, err := sc.get()
		if err != nil {
			pause(claim, 50*time.Millisecond)
			continue
		}
		seq := ld.ledger.Next(session)
		started := time.Now()
		msg := &azservicebus.Message{Body: payload, ApplicationProperties: bench.Stamp(runID, seq, started)}
		key, queue := "", queueFor(keys != "")
		switch {
		case keys != "":
			key = fmt.Sprint(keys, n%keysPerLoop)
			msg.PartitionKey = &key
		case session != "":
			key, queue = "session "+session, sessionQueueName
			msg.SessionID = &session
		}
		ld.order.sending(seq, queue)
		ld.ledger.Sent(seq)
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		err = s.SendMessage(ctx, msg, nil)
		cancel()
		if err != nil {
			ld.ledger.SendFailed(seq)
			ld.trace.line("send-failed seq=%d key=%s err=%q", seq, key, err.Error())
			sc.broken(gen)
			pause(claim, 20*time.Millisecond)
			continue
		}
		if key != "" {
			ld.order.acked(seq, key)
		}
		ld.ledger.Acked(seq)
		ld.acks.Add(1)
		ld.acked.add(time.Now())
	}
}

// receive runs the receivers until ctx ends.
func (ld *load) receive(ctx context.Context, receivers int) {
	var wg sync.WaitGroup
	for i := range receivers {
		partitioned := ld.partitioned(i)
		rc := &client[*azservicebus.Receiver]{ld: ld, id: i + 1, partitioned: partitioned, open: func(cl *azservicebus.Client) (*azservicebus.Receiver, error) {
			return cl.NewReceiverForQueue(queueFor(partitioned), nil)
		}}
		wg.Go(func() {
			defer rc.close()
			ld.receiveLoop(ctx, rc)
		})
	}
	if ld.c.Groups > 0 && ld.c.Sessions > 0 {
		wg.Go(func() { ld.sessionReceiveLoop(ctx, receivers+1) })
	}
	wg.Wait()
}

func (ld *load) receiveLoop(ctx context.Context, rc *client[*azservicebus.Receiver]) {
	for ctx.Err() == nil {
		r, gen, err := rc.get()
		if err != nil {
			pause(ctx, 50*time.Millisecond)
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		msgs, err := r.ReceiveMessages(rctx, ld.c.Prefetch, nil)
		cancel()
		if err != nil && len(msgs) == 0 {
			if ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
				ld.trace.line("receive-failed rcv=%d.%d err=%q", rc.id, gen, err.Error())
				rc.broken(gen)
				pause(ctx, 20*time.Millisecond)
			}
			continue
		}
		ld.settleAll(rcvRef{id: rc.id, gen: gen, queue: queueFor(rc.partitioned), broken: func() { rc.broken(gen) }}, r, msgs)
	}
}

// rcvRef names a receiver for the accounting: its number and client
// generation (the trace), its queue, and how to retire its client.
type rcvRef struct {
	id, gen int
	queue   string
	session string // the session it holds ("" for none)
	broken  func()
}

// completer is a Receiver or a SessionReceiver.
type completer interface {
	CompleteMessage(context.Context, *azservicebus.ReceivedMessage, *azservicebus.CompleteMessageOptions) error
}

// faultBegins marks a failover under way until the returned func runs,
// and counts it (failing, faults).
func (ld *load) faultBegins() (ends func()) {
	ld.failing.Add(1)
	ld.faults.Add(1)
	return func() { ld.failing.Add(-1) }
}

// settleAll completes a batch of deliveries at once and records what the
// broker answered: confirmed; refused because the lock was lost (the
// message goes back); or nothing useful (the completion may or may not
// have been applied).
func (ld *load) settleAll(rc rcvRef, r completer, msgs []*azservicebus.ReceivedMessage) {
	gen := rc.gen
	var wg sync.WaitGroup
	for _, m := range msgs {
		runID, seq, _, _ := bench.ReadStamp(m.ApplicationProperties)
		_, nth := ld.ledger.Delivered(0, bench.Delivery{RunID: runID, Seq: seq, Session: rc.session, BrokerSeq: seqOf(m)})
		if runID == ld.ledger.RunID() && !ld.order.delivered(seq, rc.queue, seqOf(m)) {
			ld.trace.line("misrouted rcv=%d.%d seq=%d from %s", rc.id, gen, seq, rc.queue)
		}
		ld.trace.line("deliver rcv=%d.%d seq=%d nth=%d bseq=%d count=%d key=%s session=%s lock=%x link=%.6s", rc.id, gen, seq, nth, seqOf(m), m.DeliveryCount, keyOf(m), rc.session, m.LockToken, linkNameOf(m))
		ld.lastRecv.Store(time.Now().UnixNano())
		ld.inFlight.Add(1)
		wg.Go(func() {
			defer ld.inFlight.Add(-1)
			ld.settling.Add(1) // before settleStarts: see completionsAt
			ld.settleStarts.Add(1)
			failing, faults := ld.failing.Load() > 0, ld.faults.Load()
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			err := r.CompleteMessage(ctx, m, nil)
			cancel()
			ld.settling.Add(-1)
			if errors.Is(err, context.DeadlineExceeded) {
				if ld.connLost.lost(linkNameOf(m)) {
					ld.hungDeadConn.Add(1)
				} else {
					ld.hung.Add(1)
				}
			}
			failing = failing || ld.failing.Load() > 0 || ld.faults.Load() != faults
			var sbErr *azservicebus.Error
			ld.trace.line("complete rcv=%d.%d seq=%d nth=%d bseq=%d lock=%x err=%v", rc.id, gen, seq, nth, seqOf(m), m.LockToken, err)
			switch {
			case err == nil:
				ld.ledger.Completed(0, seq, nth)
			case errors.As(err, &sbErr) && sbErr.Code == azservicebus.CodeLockLost && failing:
				// Refused while a leader went away: the broker that held
				// the lock may have applied it before the refusal
				// (clusters with data groups report such a completion
				// as lock lost, never as "retry": core.routedSettleErr).
				ld.ledger.CompletionUnanswered(0, seq)
			case errors.As(err, &sbErr) && sbErr.Code == azservicebus.CodeLockLost:
				ld.ledger.Released(0, seq)
			default:
				ld.ledger.CompletionUnanswered(0, seq)
				rc.broken()
			}
		})
	}
	wg.Wait()
}

// completionsAt runs act (a failover) and returns how many completions
// were being sent or awaited at any moment around it: an upper bound of
// those the broker applied without its answer arriving.
func (ld *load) completionsAt(act func() error) (int64, error) {
	starts := ld.settleStarts.Load()
	under := ld.settling.Load()
	err := act()
	return under + ld.settleStarts.Load() - starts, err
}

// keyOf is a delivery's partition key ("" for none).
func keyOf(m *azservicebus.ReceivedMessage) string {
	if m.PartitionKey == nil {
		return ""
	}
	return *m.PartitionKey
}

// seqOf is a delivery's broker sequence number (0: none given).
func seqOf(m *azservicebus.ReceivedMessage) int64 {
	if m.SequenceNumber == nil {
		return 0
	}
	return *m.SequenceNumber
}

func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

package bench

import (
	"context"
	"errors"
	"fmt"

	"github.com/Azure/go-amqp"
)

// amqpTransport drives a plain AMQP 1.0 endpoint with go-amqp: per
// --connections one connection with two sessions, one for senders and
// one for receivers (so that a flood of transfers one way cannot use up
// the session window the other way needs).
type amqpTransport struct {
	c     *Config
	runID string

	conns []*amqp.Conn
	send  []*amqp.Session // per connection
	recv  []*amqp.Session
}

func newAMQPTransport(ctx context.Context, c *Config, runID string) (*amqpTransport, error) {
	t := &amqpTransport{c: c, runID: runID}
	roots, err := trustedRoots(c.CAFile)
	if err != nil {
		return nil, err
	}
	urls := c.urls()
	for i := range c.Connections {
		addr := urls[i%len(urls)]
		conn, err := dialAMQP(ctx, addr, &amqp.ConnOptions{
			SASLType:    amqp.SASLTypePlain(c.User, c.Password),
			ContainerID: fmt.Sprintf("omnibus-bench-%s-%d", runID, i),
		}, roots, c.DirectWrites)
		if err != nil {
			t.close(ctx)
			return nil, fmt.Errorf("connecting to %s: %w", addr, err)
		}
		t.conns = append(t.conns, conn)
		for _, list := range []*[]*amqp.Session{&t.send, &t.recv} {
			s, err := conn.NewSession(ctx, nil)
			if err != nil {
				t.close(ctx)
				return nil, fmt.Errorf("session: %w", err)
			}
			*list = append(*list, s)
		}
	}
	return t, nil
}

func (t *amqpTransport) close(context.Context) {
	for _, c := range t.conns {
		c.Close()
	}
}

func (t *amqpTransport) sender(ctx context.Context, conn int) (sender, error) {
	opts := &amqp.SenderOptions{}
	if t.c.Presettled {
		opts.SettlementMode = amqp.SenderSettleModeSettled.Ptr()
	}
	var s *amqp.Sender
	err := attachRetrying(ctx, func() (err error) {
		s, err = t.send[conn%len(t.send)].NewSender(ctx, t.c.Queue, opts)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("attaching a sender to %s: %w", t.c.Queue, err)
	}
	as := &amqpSender{s: s, runID: t.runID, durable: t.c.Durable, keys: t.c.PartitionKeys}
	if t.c.DirectWrites {
		return directSender{as}, nil
	}
	return as, nil
}

// directSender is an amqpSender without start, so that every send in
// flight is its own goroutine calling Send (sendPlan.loop), the way an
// application or an SDK sends concurrently on one link.
type directSender struct{ s *amqpSender }

func (d directSender) send(ctx context.Context, m outMsg, payload []byte) error {
	return d.s.send(ctx, m, payload)
}

func (d directSender) close(ctx context.Context) { d.s.close(ctx) }

func (t *amqpTransport) receiver(ctx context.Context, conn, _ int, _ string) (receiver, error) {
	opts := &amqp.ReceiverOptions{Credit: int32(t.c.Credit)}
	if t.c.BatchCredit {
		opts.Credit = -1 // we issue it, see amqpReceiver.receive
	}
	// Ask for unsettled deliveries explicitly: with go-amqp's defaults
	// (rcv-settle-mode first, snd-settle-mode mixed) Service Bus, and
	// omnibus, deliver receive-and-delete. Unsettled deliveries that the
	// client settles with its accept are peek-lock + complete on Service
	// Bus and acknowledged delivery on RabbitMQ.
	opts.RequestedSenderSettleMode = amqp.SenderSettleModeUnsettled.Ptr()
	if t.c.RAD {
		opts.RequestedSenderSettleMode = amqp.SenderSettleModeSettled.Ptr()
	}
	var r *amqp.Receiver
	err := attachRetrying(ctx, func() (err error) {
		r, err = t.recv[conn%len(t.recv)].NewReceiver(ctx, t.c.Queue, opts)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("attaching a receiver to %s: %w", t.c.Queue, err)
	}
	ar := &amqpReceiver{r: r, rad: t.c.RAD}
	if t.c.BatchCredit {
		ar.batch = t.c.Credit
	}
	return ar, nil
}

// annSequenceNumber is the message annotation carrying Service Bus's
// sequence number.
const annSequenceNumber amqp.Symbol = "x-opt-sequence-number"

// annPartitionKey is the message annotation carrying Service Bus's
// partition key.
const annPartitionKey amqp.Symbol = "x-opt-partition-key"

type amqpSender struct {
	s       *amqp.Sender
	runID   string
	durable bool
	keys    int // > 0: partition keys to take turns with (Config.PartitionKeys)
}

func (s *amqpSender) send(ctx context.Context, m outMsg, payload []byte) error {
	return s.s.Send(ctx, s.message(m, payload), nil)
}

func (s *amqpSender) start(ctx context.Context, m outMsg, payload []byte) (func(context.Context) error, error) {
	r, err := s.s.SendWithReceipt(ctx, s.message(m, payload), nil)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		state, err := r.Wait(ctx)
		if err != nil {
			return err
		}
		if st, ok := state.(*amqp.StateRejected); ok {
			if st.Error != nil {
				return st.Error
			}
			return errors.New("the peer rejected the message")
		}
		return nil
	}, nil
}

func (s *amqpSender) message(m outMsg, payload []byte) *amqp.Message {
	msg := amqp.NewMessage(payload)
	msg.ApplicationProperties = stampProps(s.runID, m)
	if s.durable {
		msg.Header = &amqp.MessageHeader{Durable: true}
	}
	if m.session != "" {
		msg.Properties = &amqp.MessageProperties{GroupID: &m.session}
	}
	if s.keys > 0 {
		msg.Annotations = amqp.Annotations{annPartitionKey: partitionKey(m.seq, s.keys)}
	}
	return msg
}

func (s *amqpSender) close(ctx context.Context) { s.s.Close(ctx) }

type amqpReceiver struct {
	r     *amqp.Receiver
	rad   bool
	batch int // > 0: grant this much credit only once the last grant is used up
	left  int // credit of the last grant not used yet
}

func (r *amqpReceiver) receive(ctx context.Context) ([]inMsg, error) {
	if r.batch > 0 && r.left == 0 {
		if err := r.r.IssueCredit(uint32(r.batch)); err != nil {
			return nil, err
		}
		r.left = r.batch
	}
	msg, err := r.r.Receive(ctx, nil)
	if err == nil && r.batch > 0 {
		r.left--
	}
	if err != nil {
		return nil, err
	}
	return []inMsg{amqpIn(msg)}, nil
}

func amqpIn(msg *amqp.Message) inMsg {
	in := inMsg{handle: msg}
	in.RunID, in.Seq, in.sent, _ = readStamp(msg.ApplicationProperties)
	if msg.Properties != nil && msg.Properties.GroupID != nil {
		in.Session = *msg.Properties.GroupID
	}
	// Service Bus (and omnibus) annotate the broker's sequence number;
	// go-amqp decodes a symbol key as a string.
	if n, ok := msg.Annotations[string(annSequenceNumber)].(int64); ok {
		in.BrokerSeq = n
	}
	return in
}

func (r *amqpReceiver) settle(ctx context.Context, m inMsg) error {
	if r.rad {
		return nil
	}
	msg, ok := m.handle.(*amqp.Message)
	if !ok {
		return errors.New("bench: not an AMQP delivery")
	}
	return r.r.AcceptMessage(ctx, msg)
}

func (r *amqpReceiver) close(ctx context.Context) { r.r.Close(ctx) }

// amqpSettlers is how many goroutines accept deliveries for one receiver.
// go-amqp sends each disposition through three goroutines and waits for
// the write; in receiver-settle-mode first nothing comes back, so the
// accepts of a burst can go out side by side.
const amqpSettlers = 4

func (r *amqpReceiver) settlers() int { return amqpSettlers }

// partitionKey is the partition key of message seq among keys keys.
func partitionKey(seq uint64, keys int) string { return fmt.Sprintf("k%d", seq%uint64(keys)) }

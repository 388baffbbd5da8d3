package bench

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// sdkTransport drives the endpoint through the official azservicebus
// SDK: one client (one AMQP connection) per --connections. Sessions and
// fan-out need it, as they speak Service Bus rather than plain AMQP.
type sdkTransport struct {
	c       *Config
	runID   string
	clients []*azservicebus.Client
}

// connString is c.ConnString, or one built from the AMQP URL and the
// SASL user and password, in the emulator's form (plain AMQP).
func connString(c *Config) (string, error) {
	if c.ConnString != "" {
		return c.ConnString, nil
	}
	u, err := url.Parse(c.URL)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("%w: --url %q is not amqp://host:port", errUsage, c.URL)
	}
	return "Endpoint=sb://" + u.Host + ";SharedAccessKeyName=" + c.User +
		";SharedAccessKey=" + c.Password + ";UseDevelopmentEmulator=true;", nil
}

func newSDKTransport(c *Config, runID string) (*sdkTransport, error) {
	cs, err := connString(c)
	if err != nil {
		return nil, err
	}
	t := &sdkTransport{c: c, runID: runID}
	for range c.Connections {
		cl, err := azservicebus.NewClientFromConnectionString(cs, nil)
		if err != nil {
			return nil, fmt.Errorf("%w: connection string: %v", errUsage, err)
		}
		t.clients = append(t.clients, cl)
	}
	return t, nil
}

func (t *sdkTransport) close(ctx context.Context) {
	for _, cl := range t.clients {
		cl.Close(ctx)
	}
}

func (t *sdkTransport) entity() string {
	if t.c.Scenario == ScenarioFanout {
		return t.c.Topic
	}
	return t.c.Queue
}

func (t *sdkTransport) sender(_ context.Context, conn int) (sender, error) {
	s, err := t.clients[conn%len(t.clients)].NewSender(t.entity(), nil)
	if err != nil {
		return nil, fmt.Errorf("sender for %s: %w", t.entity(), err)
	}
	return &sdkSender{s: s, runID: t.runID}, nil
}

func (t *sdkTransport) receiver(ctx context.Context, conn, stream int, session string) (receiver, error) {
	cl := t.clients[conn%len(t.clients)]
	mode := azservicebus.ReceiveModePeekLock
	if t.c.RAD {
		mode = azservicebus.ReceiveModeReceiveAndDelete
	}
	r := &sdkReceiver{max: t.c.Credit, rad: t.c.RAD}
	if session != "" {
		// The SDK releases messages that reach it between ReceiveMessages
		// calls; a released message comes back behind ones already on the
		// wire, so the application would see the session out of order
		// through no fault of the broker. With one credit per call nothing
		// arrives between calls and the FIFO check stays exact.
		r.max = 1
	}
	var err error
	switch {
	case session != "":
		r.sr, err = cl.AcceptSessionForQueue(ctx, t.c.Queue, session, &azservicebus.SessionReceiverOptions{ReceiveMode: mode})
	case t.c.Scenario == ScenarioFanout:
		r.r, err = cl.NewReceiverForSubscription(t.c.Topic, t.c.Subscriptions[stream], &azservicebus.ReceiverOptions{ReceiveMode: mode})
	default:
		r.r, err = cl.NewReceiverForQueue(t.c.Queue, &azservicebus.ReceiverOptions{ReceiveMode: mode})
	}
	if err != nil {
		return nil, fmt.Errorf("receiver: %w", err)
	}
	return r, nil
}

type sdkSender struct {
	s     *azservicebus.Sender
	runID string
}

func (s *sdkSender) send(ctx context.Context, m outMsg, payload []byte) error {
	msg := &azservicebus.Message{Body: payload, ApplicationProperties: stampProps(s.runID, m)}
	if m.session != "" {
		msg.SessionID = &m.session
	}
	return s.s.SendMessage(ctx, msg, nil)
}

func (s *sdkSender) close(ctx context.Context) { s.s.Close(ctx) }

// sdkReceiver wraps either a plain or a session receiver.
type sdkReceiver struct {
	r   *azservicebus.Receiver
	sr  *azservicebus.SessionReceiver
	max int
	rad bool
}

func (r *sdkReceiver) receive(ctx context.Context) ([]inMsg, error) {
	var msgs []*azservicebus.ReceivedMessage
	var err error
	if r.sr != nil {
		msgs, err = r.sr.ReceiveMessages(ctx, r.max, nil)
	} else {
		msgs, err = r.r.ReceiveMessages(ctx, r.max, nil)
	}
	if err != nil {
		return nil, err
	}
	out := make([]inMsg, 0, len(msgs))
	for _, m := range msgs {
		in := inMsg{handle: m}
		in.RunID, in.Seq, in.sent, _ = readStamp(m.ApplicationProperties)
		if m.SessionID != nil {
			in.Session = *m.SessionID
		}
		if m.SequenceNumber != nil {
			in.BrokerSeq = *m.SequenceNumber
		}
		out = append(out, in)
	}
	return out, nil
}

func (r *sdkReceiver) settle(ctx context.Context, m inMsg) error {
	if r.rad {
		return nil
	}
	msg, ok := m.handle.(*azservicebus.ReceivedMessage)
	if !ok {
		return errors.New("bench: not an SDK message")
	}
	if r.sr != nil {
		return r.sr.CompleteMessage(ctx, msg, nil)
	}
	return r.r.CompleteMessage(ctx, msg, nil)
}

// sdkSettlers is how many goroutines complete deliveries for one SDK
// receiver, as an application that handles messages concurrently would:
// each CompleteMessage waits for the broker's answer (a durable
// settlement), so completing one at a time measures round trips, not the
// broker (1.7k msg/s on omnibus).
const sdkSettlers = 32

func (r *sdkReceiver) settlers() int {
	if r.rad {
		return 0
	}
	return sdkSettlers
}

func (r *sdkReceiver) close(ctx context.Context) {
	if r.sr != nil {
		r.sr.Close(ctx)
		return
	}
	r.r.Close(ctx)
}

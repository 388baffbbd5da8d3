package amqpserver

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/core/sas"
)

const (
	testKeyName = "RootManageSharedAccessKey"
	testKey     = "SAS_KEY_VALUE"
)

// testServer is a server on a loopback port over a memstore broker.
type testServer struct {
	*coretest.Env
	srv  *Server
	addr string
}

// newTestServer starts a server with the emulator's default key and a
// queue "q" (1 MiB max message size); cfg may adjust the config.
func newTestServer(t testing.TB, cfg func(*Config)) *testServer {
	t.Helper()
	env := coretest.New(t)
	v, err := sas.NewValidator(sas.Config{Rules: []sas.Rule{
		{KeyName: testKeyName, Key: testKey, Rights: sas.Manage},
		{KeyName: "listen-only", Key: "listen-key", Rights: sas.Listen},
	}})
	if err != nil {
		t.Fatal(err)
	}
	c := Config{Broker: env.Broker, Logger: zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)), Auth: v}
	if cfg != nil {
		cfg(&c)
	}
	srv, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	ts := &testServer{Env: env, srv: srv, addr: l.Addr().String()}
	ts.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q", MaxMessageSizeInKilobytes: 1024})
	return ts
}

// dial connects with SASL PLAIN and the root key.
func (ts *testServer) dial(t testing.TB) *amqp.Conn {
	t.Helper()
	return ts.dialWith(t, &amqp.ConnOptions{SASLType: amqp.SASLTypePlain(testKeyName, testKey)})
}

func (ts *testServer) dialWith(t testing.TB, opts *amqp.ConnOptions) *amqp.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	c, err := amqp.Dial(ctx, "amqp://"+ts.addr, opts)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// session opens a session on a new PLAIN connection.
func (ts *testServer) session(t testing.TB) *amqp.Session {
	t.Helper()
	return mustSession(t, ts.dial(t))
}

func mustSession(t testing.TB, c *amqp.Conn) *amqp.Session {
	t.Helper()
	s, err := c.NewSession(t.Context(), nil)
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	return s
}

func mustSender(t testing.TB, s *amqp.Session, target string) *amqp.Sender {
	t.Helper()
	snd, err := s.NewSender(t.Context(), target, nil)
	if err != nil {
		t.Fatalf("NewSender(%q): %v", target, err)
	}
	return snd
}

// mustReceiver attaches a receiver with manual credit in the given mode.
func mustReceiver(t testing.TB, s *amqp.Session, source string, mode amqp.ReceiverSettleMode) *amqp.Receiver {
	t.Helper()
	opts := &amqp.ReceiverOptions{Credit: -1, SettlementMode: mode.Ptr()}
	if mode == amqp.ReceiverSettleModeFirst {
		opts.RequestedSenderSettleMode = amqp.SenderSettleModeSettled.Ptr()
	}
	r, err := s.NewReceiver(t.Context(), source, opts)
	if err != nil {
		t.Fatalf("NewReceiver(%q): %v", source, err)
	}
	return r
}

func mustSend(t testing.TB, snd *amqp.Sender, body string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := snd.Send(ctx, amqp.NewMessage([]byte(body)), nil); err != nil {
		t.Fatalf("Send: %v", err)
	}
}

// mustReceive issues one credit and waits for a message.
func mustReceive(t testing.TB, r *amqp.Receiver) *amqp.Message {
	t.Helper()
	if err := r.IssueCredit(1); err != nil {
		t.Fatalf("IssueCredit: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	m, err := r.Receive(ctx, nil)
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	return m
}

func TestSendReceivePeekLock(t *testing.T) {
	ts := newTestServer(t, nil)
	s := ts.session(t)
	mustSend(t, mustSender(t, s, "q"), "hello")
	r := mustReceiver(t, s, "q", amqp.ReceiverSettleModeSecond)
	m := mustReceive(t, r)
	if got := string(m.GetData()); got != "hello" {
		t.Errorf("body = %q, want hello", got)
	}
	if n := len(m.DeliveryTag); n != 16 {
		t.Errorf("delivery tag has %d bytes, want 16", n)
	}
	if err := r.AcceptMessage(t.Context(), m); err != nil {
		t.Fatalf("AcceptMessage: %v", err)
	}
	if c, _ := ts.Broker.Counts("q"); c.Active != 0 {
		t.Errorf("active after complete = %d, want 0", c.Active)
	}
}

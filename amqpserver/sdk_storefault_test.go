package amqpserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/core/sas"
	"github.com/omnibusmq/omnibus/storage"
)

// A full disk as the official Go SDK sees it: a send fails with
// com.microsoft:server-busy, which the SDK retries with back-off (the
// broker stored nothing, so a retry makes no duplicate); once space
// returns within its retries the send goes through, once.
func TestSDKSendOnAFullDisk(t *testing.T) {
	env, fs := coretest.NewFault(t)
	addr := serveFaultBroker(t, env)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	cs := "Endpoint=sb://" + addr + ";SharedAccessKeyName=" + testKeyName + ";SharedAccessKey=" + testKey + ";UseDevelopmentEmulator=true"
	client, err := azservicebus.NewClientFromConnectionString(cs, &azservicebus.ClientOptions{
		RetryOptions: azservicebus.RetryOptions{MaxRetries: 3, RetryDelay: 5 * time.Millisecond, MaxRetryDelay: 20 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(context.Background())
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	snd, err := client.NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	full := fmt.Errorf("test disk: %w", storage.ErrNoSpace)
	fs.FailApplies(0, -1, full)
	err = snd.SendMessage(ctx, &azservicebus.Message{Body: []byte("refused")}, nil)
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae.Condition != "com.microsoft:server-busy" {
		t.Fatalf("send on a full disk: %v, want com.microsoft:server-busy", err)
	}
	if n := fs.Failed.Load(); n != 4 {
		t.Errorf("%d writes refused, want 4 (the send and the SDK's 3 retries)", n)
	}
	// Space returns after two more attempts: the SDK's own retries get
	// the send through.
	fs.FailApplies(0, 2, full)
	if err := snd.SendMessage(ctx, &azservicebus.Message{Body: []byte("after")}, nil); err != nil {
		t.Fatalf("send while space returns: %v", err)
	}
	fs.Heal()
	rcv, err := client.NewReceiverForQueue("q", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	if got := receiveOne(t, rcv); string(got.Body) != "after" {
		t.Fatalf("received %q, want the one message sent after the fault", got.Body)
	}
	if c := env.MustCounts(t, "q"); c.Total != 0 {
		t.Fatalf("counts %+v after receiving the one message: a refused send was stored", c)
	}
	if err := env.Broker.Check(); err != nil {
		t.Fatal(err)
	}
}

// A send whose write the disk failed under, so that whether it is stored
// is unknown: the broker answers com.microsoft:timeout (Service Bus's
// ServiceTimeout, "might or might not have successfully completed"), which
// the Go SDK retries (RecoveryKindNone); the retry stores it. Without
// retries the client sees the condition itself.
func TestSDKSendWhoseOutcomeIsUnknown(t *testing.T) {
	env, fs := coretest.NewFault(t)
	addr := serveFaultBroker(t, env)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	cs := "Endpoint=sb://" + addr + ";SharedAccessKeyName=" + testKeyName + ";SharedAccessKey=" + testKey + ";UseDevelopmentEmulator=true"
	unknown := fmt.Errorf("test disk: %w: %w", storage.ErrUnavailable, storage.ErrOutcomeUnknown)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, retries := range []int32{-1, 3} {
		client, err := azservicebus.NewClientFromConnectionString(cs, &azservicebus.ClientOptions{
			RetryOptions: azservicebus.RetryOptions{MaxRetries: retries, RetryDelay: 5 * time.Millisecond, MaxRetryDelay: 20 * time.Millisecond},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close(context.Background())
		snd, err := client.NewSender("q", nil)
		if err != nil {
			t.Fatal(err)
		}
		fs.FailApplies(0, 1, unknown)
		err = snd.SendMessage(ctx, &azservicebus.Message{Body: []byte("m")}, nil)
		// The SDK reports it as its own timeout error, the AMQP error's
		// text inside.
		switch {
		case retries < 0 && (err == nil || !strings.Contains(err.Error(), "Condition: com.microsoft:timeout")):
			t.Fatalf("send whose outcome is unknown, no retries: %v, want com.microsoft:timeout", err)
		case retries > 0 && err != nil:
			t.Fatalf("send whose outcome is unknown, with the SDK's retries: %v, want it stored by a retry", err)
		}
		fs.Heal()
	}
	if c := env.MustCounts(t, "q"); c.Total != 1 {
		t.Fatalf("counts %+v: want the one message the SDK's retry stored", c)
	}
}

// A completion whose writes fail for a moment is retried by the server,
// not answered with the failure: the Go SDK would retry a rejection with
// server-busy or timeout by settling the same go-amqp message again,
// which go-amqp reports done without asking the broker, so
// CompleteMessage returned nil and the message came back
// (settleretry.go). Here the disk refuses the completion three times
// (server busy), or fails it once with its outcome unknown; then it
// takes it: CompleteMessage succeeds and the message is gone. Before the
// server retried, the count below found it still there.
func TestSDKCompleteThroughPassingWriteFaults(t *testing.T) {
	for _, c := range []struct {
		name  string
		fails int
		err   error
	}{
		{"the disk full for three writes", 3, fmt.Errorf("test disk: %w", storage.ErrNoSpace)},
		{"a write of unknown outcome", 1, fmt.Errorf("test disk: %w: %w", storage.ErrUnavailable, storage.ErrOutcomeUnknown)},
	} {
		t.Run(c.name, func(t *testing.T) {
			env, fs := coretest.NewFault(t)
			addr := serveFaultBroker(t, env)
			env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
			env.MustSend(t, "q", coretest.Text("x"))
			rcv := newSDKReceiver(t, addr, "q")
			m := receiveOne(t, rcv)
			fs.FailApplies(0, c.fails, c.err)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			if err := rcv.CompleteMessage(ctx, m, nil); err != nil {
				t.Fatalf("complete through %s: %v", c.name, err)
			}
			if n := fs.Failed.Load(); n != int64(c.fails) {
				t.Errorf("%d writes failed, want %d", n, c.fails)
			}
			if cnt := env.MustCounts(t, "q"); cnt.Total != 0 {
				t.Fatalf("counts %+v after CompleteMessage reported success", cnt)
			}
		})
	}
}

// A completion the store refuses for longer than the server retries
// (SettleRetryFor) is answered message-lock-lost, which the Go SDK does
// not retry: CompleteMessage fails, and the message stays to be delivered
// again (before, it reported success). Through go-amqp the same shows as
// the rejected outcome's condition.
func TestCompletionOnAFullDiskFailsAsLockLost(t *testing.T) {
	env, fs := coretest.NewFault(t)
	_, addr := serveBrokerWith(t, env, func(c *Config) { c.SettleRetryFor = 300 * time.Millisecond })
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	env.MustSend(t, "q", coretest.Text("sdk"), coretest.Text("go-amqp"))
	rcv := newSDKReceiver(t, addr, "q")
	m := receiveOne(t, rcv)
	fs.FailApplies(0, -1, fmt.Errorf("test disk: %w", storage.ErrNoSpace))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err := rcv.CompleteMessage(ctx, m, nil)
	var se *azservicebus.Error
	if !errors.As(err, &se) || se.Code != azservicebus.CodeLockLost {
		t.Fatalf("complete on a full disk: %v, want the SDK's CodeLockLost", err)
	}

	ts := &testServer{Env: env, addr: addr}
	r, err := ts.session(t).NewReceiver(t.Context(), "q", &amqp.ReceiverOptions{SettlementMode: amqp.ReceiverSettleModeSecond.Ptr(), Credit: 1})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := r.Receive(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	err = r.AcceptMessage(t.Context(), raw)
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae.Condition != "com.microsoft:message-lock-lost" {
		t.Fatalf("complete on a full disk through go-amqp: %v, want com.microsoft:message-lock-lost", err)
	}
	if c := env.MustCounts(t, "q"); c.Active != 2 {
		t.Fatalf("counts %+v after refused completions, want both messages kept", c)
	}
	fs.Heal()
	tok, _ := deliveryTagToLockToken(raw.DeliveryTag)
	env.MustSettle(t, "q", tok, core.Outcome{Kind: core.Complete})
	if c := env.MustCounts(t, "q"); c.Active != 1 {
		t.Fatalf("counts %+v after completing one message once space returned", c)
	}
}

// newSDKReceiver is a Go SDK peek-lock receiver on entity at addr.
func newSDKReceiver(t *testing.T, addr, entity string) *azservicebus.Receiver {
	t.Helper()
	cs := "Endpoint=sb://" + addr + ";SharedAccessKeyName=" + testKeyName + ";SharedAccessKey=" + testKey + ";UseDevelopmentEmulator=true"
	client, err := azservicebus.NewClientFromConnectionString(cs, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(context.Background()) })
	rcv, err := client.NewReceiverForQueue(entity, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rcv
}

// serveFaultBroker serves env's broker on a loopback port until the test
// ends.
func serveFaultBroker(t *testing.T, env *coretest.Env) string {
	t.Helper()
	_, addr := serveBrokerOf(t, env)
	return addr
}

// serveBrokerOf is serveFaultBroker, returning the server too.
func serveBrokerOf(t *testing.T, env *coretest.Env) (*Server, string) {
	t.Helper()
	return serveBrokerWith(t, env, func(*Config) {})
}

// serveBrokerWith is serveBrokerOf with the server's Config changed by
// set.
func serveBrokerWith(t *testing.T, env *coretest.Env, set func(*Config)) (*Server, string) {
	t.Helper()
	v, err := sas.NewValidator(sas.Config{Rules: []sas.Rule{{KeyName: testKeyName, Key: testKey, Rights: sas.Manage}}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Broker: env.Broker, Logger: zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)), Auth: v}
	set(&cfg)
	srv, err := New(cfg)
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
		_ = srv.Shutdown(ctx)
		<-done
	})
	return srv, l.Addr().String()
}

// A shutdown does not wait for a settlement the server is retrying: the
// drain ends (Shutdown returns nil long before SettleRetryFor, an hour
// here), and the settlement is answered message-lock-lost before the
// close, as when SettleRetryFor passes; the message is still there.
// (Unanswered, it would meet the close's amqp:connection:forced, which
// go-amqp takes as the delivery settled as well.)
func TestShutdownDoesNotWaitForSettlementRetries(t *testing.T) {
	env, fs := coretest.NewFault(t)
	srv, addr := serveBrokerWith(t, env, func(c *Config) { c.SettleRetryFor = time.Hour })
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	env.MustSend(t, "q", coretest.Text("x"))
	ts := &testServer{Env: env, addr: addr}
	r, err := ts.session(t).NewReceiver(t.Context(), "q", &amqp.ReceiverOptions{SettlementMode: amqp.ReceiverSettleModeSecond.Ptr(), Credit: 1})
	if err != nil {
		t.Fatal(err)
	}
	m, err := r.Receive(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	fs.FailApplies(0, -1, fmt.Errorf("test disk: %w", storage.ErrNoSpace))
	accepted := make(chan error, 1)
	go func() { accepted <- r.AcceptMessage(context.Background(), m) }()
	waitFor(t, "the completion to be refused", 10*time.Second, func() bool { return fs.Failed.Load() > 0 })
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown while a settlement is retried: %v", err)
	}
	err = <-accepted
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae.Condition != "com.microsoft:message-lock-lost" {
		t.Fatalf("AcceptMessage across the shutdown: %v, want com.microsoft:message-lock-lost", err)
	}
	if c := env.MustCounts(t, "q"); c.Active != 1 {
		t.Fatalf("counts %+v: the message must stay", c)
	}
}

// A completion whose write's outcome was unknown, and whose retry then
// found the lock lost (here it expired meanwhile): the server looks for
// the message to learn which. It is still there, so the completion did
// not take effect: the answer is message-lock-lost (the Go SDK's
// CodeLockLost), and the message stays. Before, the answer was
// com.microsoft:timeout, which the SDK retried into a success.
func TestSDKCompleteUnknownThenLockLostLooksForTheMessage(t *testing.T) {
	env, fs := coretest.NewFault(t)
	addr := serveFaultBroker(t, env)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q", LockDuration: 30 * time.Second})
	env.MustSend(t, "q", coretest.Text("x"))
	rcv := newSDKReceiver(t, addr, "q")
	m := receiveOne(t, rcv)
	var once sync.Once
	fs.OnApply(func(*storage.Batch) error {
		failed := false
		once.Do(func() {
			env.Clock.Advance(time.Minute) // the lock lapses while the write is in doubt
			failed = true
		})
		if failed {
			return fmt.Errorf("test disk: %w: %w", storage.ErrUnavailable, storage.ErrOutcomeUnknown)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err := rcv.CompleteMessage(ctx, m, nil)
	var se *azservicebus.Error
	if !errors.As(err, &se) || se.Code != azservicebus.CodeLockLost {
		t.Fatalf("complete in doubt, then its lock lost, the message still there: %v, want the SDK's CodeLockLost", err)
	}
	fs.Heal()
	if c := env.MustCounts(t, "q"); c.Active != 1 {
		t.Fatalf("counts %+v: the message must still be there", c)
	}
}

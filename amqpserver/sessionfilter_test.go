package amqpserver

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/Azure/go-amqp"

	"github.com/omnibusmq/omnibus/core"
)

// sessionReceiver attaches a peek-lock receiver for session id ("" = next
// available, waiting at most wait) the way the Go SDK does.
func sessionReceiver(t testing.TB, s *amqp.Session, entity, id string, wait time.Duration) (*amqp.Receiver, error) {
	t.Helper()
	var v any
	if id != "" {
		v = id
	}
	opts := &amqp.ReceiverOptions{
		Credit:         -1,
		SettlementMode: amqp.ReceiverSettleModeSecond.Ptr(),
		Filters:        []amqp.LinkFilter{amqp.NewLinkFilter(string(sessionFilterKey), sessionFilterCode, v)},
	}
	if wait > 0 {
		opts.Properties = map[string]any{string(propTimeout): uint32(wait / time.Millisecond)}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	return s.NewReceiver(ctx, entity, opts)
}

func TestSessionReceivers(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "sq", RequiresSession: true})
	ts.MustSend(t, "sq", &core.Message{SessionID: "s1", Body: []byte("one")}, &core.Message{SessionID: "s2", Body: []byte("two")})
	s := ts.session(t)

	r1, err := sessionReceiver(t, s, "sq", "s1", 0)
	if err != nil {
		t.Fatalf("accept s1: %v", err)
	}
	if got := r1.LinkSourceFilterValue(string(sessionFilterKey)); got != "s1" {
		t.Errorf("echoed session filter = %#v, want \"s1\"", got)
	}
	if _, ok := r1.Properties()[string(propLockedTo)].(int64); !ok {
		t.Errorf("locked-until-utc = %#v, want an int64", r1.Properties()[string(propLockedTo)])
	}
	if m := mustReceive(t, r1); string(m.GetData()) != "one" || *m.Properties.GroupID != "s1" {
		t.Errorf("s1 receiver got %q", m.GetData())
	}
	if ts.srv.sessionLock("SQ", "s1") == nil {
		t.Error("session lock not registered for $management")
	}

	_, err = sessionReceiver(t, s, "sq", "s1", 0)
	var ae *amqp.Error
	if !errors.As(err, &ae) || string(ae.Condition) != string(condSessionCannotLock) {
		t.Errorf("second accept of s1: %v, want session-cannot-be-locked", err)
	}

	r2, err := sessionReceiver(t, s, "sq", "", time.Second)
	if err != nil {
		t.Fatalf("accept next: %v", err)
	}
	if got := r2.LinkSourceFilterValue(string(sessionFilterKey)); got != "s2" {
		t.Errorf("next available session = %#v, want \"s2\"", got)
	}

	_, err = sessionReceiver(t, s, "sq", "", 50*time.Millisecond)
	if !errors.As(err, &ae) || string(ae.Condition) != string(condTimeout) {
		t.Errorf("accept with none left: %v, want com.microsoft:timeout", err)
	}

	if err := r1.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if ts.srv.sessionLock("sq", "s1") != nil {
		t.Error("session lock still registered after detach")
	}
	if _, err := sessionReceiver(t, s, "sq", "s1", 0); err != nil {
		t.Errorf("accept s1 after its receiver closed: %v", err)
	}
}

func TestSessionEntityNeedsFilter(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "sq", RequiresSession: true})
	_, err := ts.session(t).NewReceiver(t.Context(), "sq", nil)
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae.Condition != amqp.ErrCondNotAllowed {
		t.Errorf("plain receiver on a session queue: %v, want amqp:not-allowed", err)
	}
}

// A session receiver's link is detached with session-lock-lost as soon
// as its session lock expires, as Service Bus does, with no operation of
// the client's needed to find out; a settlement then fails on the dead
// link instead of being answered (the Go SDK takes an answer for a
// settled delivery: amqpserver/sessionlock.go), and the message is still
// there for the session's next holder.
func TestSessionLinkDetachedWhenLockExpires(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "sq", RequiresSession: true, LockDuration: time.Minute})
	ts.MustSend(t, "sq", &core.Message{SessionID: "s1", Body: []byte("one")})
	s := ts.session(t)
	r, err := sessionReceiver(t, s, "sq", "s1", 0)
	if err != nil {
		t.Fatal(err)
	}
	m := mustReceive(t, r)
	ts.Clock.Advance(2 * time.Minute)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err = r.Receive(ctx, nil) // no credit: returns only when the link ends
	var le *amqp.LinkError
	if !errors.As(err, &le) || le.RemoteErr == nil || string(le.RemoteErr.Condition) != string(condSessionLockLost) {
		t.Fatalf("receive after the session lock expired: %v, want the link detached with session-lock-lost", err)
	}
	if err := r.AcceptMessage(t.Context(), m); err == nil {
		t.Error("accept on the detached link succeeded")
	}
	r2, err := sessionReceiver(t, s, "sq", "s1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if m := mustReceive(t, r2); string(m.GetData()) != "one" || m.Header.DeliveryCount != 1 {
		t.Errorf("the session's next holder got %q (count %d), want \"one\" (count 1)", m.GetData(), m.Header.DeliveryCount)
	}
}

// A session lock ends with its broker too (a cluster node that stops
// leading the entity's group closes that group's broker): the receiver's
// link is detached with session-lock-lost at once.
func TestSessionLinkDetachedWhenBrokerCloses(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "sq", RequiresSession: true})
	ts.MustSend(t, "sq", &core.Message{SessionID: "s1", Body: []byte("one")})
	r, err := sessionReceiver(t, ts.session(t), "sq", "s1", 0)
	if err != nil {
		t.Fatal(err)
	}
	mustReceive(t, r)
	if err := ts.Broker.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err = r.Receive(ctx, nil)
	var le *amqp.LinkError
	if !errors.As(err, &le) || le.RemoteErr == nil || string(le.RemoteErr.Condition) != string(condSessionLockLost) {
		t.Fatalf("receive after the broker closed: %v, want the link detached with session-lock-lost", err)
	}
}

// A completion that reaches the broker after the session lock ended but
// before the link was detached (here: sent as the lock expires) is not
// answered rejected: the link is detached, and the accept fails.
func TestSettleAfterSessionLockExpiry(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "sq", RequiresSession: true, LockDuration: time.Minute})
	ts.MustSend(t, "sq", &core.Message{SessionID: "s1", Body: []byte("one")})
	r, err := sessionReceiver(t, ts.session(t), "sq", "s1", 0)
	if err != nil {
		t.Fatal(err)
	}
	m := mustReceive(t, r)
	ts.Clock.Advance(2 * time.Minute)
	err = r.AcceptMessage(t.Context(), m)
	var le *amqp.LinkError
	if !errors.As(err, &le) || le.RemoteErr == nil || string(le.RemoteErr.Condition) != string(condSessionLockLost) {
		t.Fatalf("accept after the session lock expired: %v, want the link detached with session-lock-lost", err)
	}
}

func TestSessionReleasedWhenConnectionCloses(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "sq", RequiresSession: true})
	ts.MustSend(t, "sq", &core.Message{SessionID: "s1", Body: []byte("one")})
	c := ts.dial(t)
	if _, err := sessionReceiver(t, mustSession(t, c), "sq", "s1", 0); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// go-amqp writes its close frame and shuts the socket without waiting
	// for ours, so the server may still be releasing the session when
	// Close returns: retry for a while, failing only if it never frees.
	sess := ts.session(t)
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := sessionReceiver(t, sess, "sq", "s1", 0)
		if err == nil {
			return
		}
		var ae *amqp.Error
		if !errors.As(err, &ae) || string(ae.Condition) != "com.microsoft:session-cannot-be-locked" || time.Now().After(deadline) {
			t.Fatalf("accept s1 after the holding connection closed: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

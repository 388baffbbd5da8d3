package amqpserver

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestSDKSessionLockLost lets a session lock expire: another client can
// take the session over, and the first receiver's next $management call
// gets 410 session-lock-lost, on which the SDK re-accepts the session
// (it treats a lost session lock as recoverable).
func TestSDKSessionLockLost(t *testing.T) {
	e := newSDKEnv(t, nil)
	ctx := sdkCtx(t)
	sendSessions(t, e.sender(t, "sq"), "a:1", "a:2")
	sr, err := e.c.AcceptSessionForQueue(ctx, "sq", "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sr.Close(ctx)
	receiveN(t, sr, 2)
	if _, err := newSDKClient(t, e.testServer).AcceptSessionForQueue(ctx, "sq", "a", nil); amqpCond(err) != "com.microsoft:session-cannot-be-locked" {
		t.Fatalf("accepting a held session = %v, want session-cannot-be-locked", err)
	}
	e.Clock.Advance(sr.LockedUntil().Sub(e.Clock.Now()) + time.Second)

	other := newSDKClient(t, e.testServer)
	sr2, err := other.AcceptSessionForQueue(ctx, "sq", "a", nil)
	if err != nil {
		t.Fatalf("accepting the expired session: %v", err)
	}
	for i, m := range receiveN(t, sr2, 2) {
		if want := fmt.Sprint(i + 1); string(m.Body) != want || m.DeliveryCount != 2 {
			t.Errorf("new owner received %q count %d, want %s 2", m.Body, m.DeliveryCount, want)
		}
	}
	// While sr2 holds the session, sr's renewal fails for good.
	if err := sr.RenewSessionLock(ctx, nil); err == nil {
		t.Error("RenewSessionLock of a session taken over succeeded")
	}
	if err := sr2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Once it is free, sr's recovery gets it back.
	if err := sr.RenewSessionLock(ctx, nil); err != nil {
		t.Fatalf("RenewSessionLock after the session was released: %v", err)
	}
	if want := e.Clock.Now().Add(time.Minute); !sr.LockedUntil().Equal(want) {
		t.Errorf("LockedUntil after recovery = %v, want %v", sr.LockedUntil(), want)
	}
	if b := bodies(receiveN(t, sr, 2)); !slices.Equal(b, []string{"1", "2"}) {
		t.Errorf("after recovery received %q", b)
	}
}

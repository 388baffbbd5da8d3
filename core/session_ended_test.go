package core_test

import (
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// ended reports whether sl's Ended channel is closed.
func ended(sl *core.SessionLock) bool {
	select {
	case <-sl.Ended():
		return true
	default:
		return false
	}
}

// A session lock's Ended channel closes whatever ends the lock (expiry by
// the broker's clock, a clean close, the broker closing) and not while
// it is held or renewed: the fronts detach the holder's link on it.
func TestSessionLockEnded(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q", RequiresSession: true, LockDuration: time.Minute})
	env.MustSend(t, "q", &core.Message{SessionID: "a"}, &core.Message{SessionID: "b"}, &core.Message{SessionID: "c"})
	accept := func(id string) *core.SessionLock {
		t.Helper()
		sl, err := env.Broker.AcceptSession(coretest.Now(t), "q", id)
		if err != nil {
			t.Fatalf("AcceptSession(%q): %v", id, err)
		}
		if sl.Ended() == nil || ended(sl) {
			t.Fatalf("a fresh lock on %q has ended (or cannot tell)", id)
		}
		return sl
	}

	a := accept("a")
	env.Clock.Advance(50 * time.Second)
	if _, err := env.Broker.RenewSessionLock(coretest.Now(t), "q", a); err != nil {
		t.Fatal(err)
	}
	env.Clock.Advance(50 * time.Second)
	if ended(a) {
		t.Error("a renewed session lock ended before its new expiry")
	}
	env.Clock.Advance(11 * time.Second)
	if !ended(a) {
		t.Error("an expired session lock did not end")
	}
	a2 := accept("a") // the session again, under a new lock
	if ended(a2) {
		t.Error("the new lock on the session ended with the old one")
	}

	b := accept("b")
	if err := env.Broker.CloseSession("q", b); err != nil {
		t.Fatal(err)
	}
	if !ended(b) {
		t.Error("a closed session lock did not end")
	}

	c := accept("c")
	if err := env.Broker.Close(); err != nil {
		t.Fatal(err)
	}
	if !ended(c) || !ended(a2) {
		t.Error("session locks held as the broker closed did not end")
	}
}

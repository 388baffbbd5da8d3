package clusterrpc

import (
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
)

// TestRemoteSessionLockEnds: a session lock accepted through another node
// has an Ended channel that closes once the lock ends on the node holding
// it, whatever ends it (expiry, the holder's close, the connection to it
// breaking), as a lock of the front's own process does; the front detaches
// the holder's link with session-lock-lost on it (amqpserver).
func TestRemoteSessionLockEnds(t *testing.T) {
	r := newRig(t)
	b := r.routed
	ctx := t.Context()
	if _, err := b.CreateEntity(ctx, core.Entity{Kind: core.KindQueue, Name: "sq", RequiresSession: true, LockDuration: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c"} {
		if _, err := b.Send(ctx, "sq", &core.Message{Body: []byte(id), SessionID: id}); err != nil {
			t.Fatal(err)
		}
	}
	accept := func(id string) *core.SessionLock {
		t.Helper()
		sl, err := b.AcceptSession(ctx, "sq", id)
		if err != nil {
			t.Fatalf("accept %s: %v", id, err)
		}
		if sl.Ended() == nil {
			t.Fatalf("session %s: a lock from another node has no Ended channel", id)
		}
		return sl
	}
	ended := func(sl *core.SessionLock) bool {
		select {
		case <-sl.Ended():
			return true
		default:
			return false
		}
	}
	waitEnded := func(sl *core.SessionLock, why string) {
		t.Helper()
		select {
		case <-sl.Ended():
		case <-time.After(10 * time.Second):
			t.Fatalf("session %s: Ended not closed within 10 s after %s", sl.SessionID, why)
		}
	}

	// Expiry on the node holding the lock.
	a := accept("a")
	waitWatching(t, r.srv)
	r.remote.Clock.Advance(5 * time.Second)
	if _, err := b.RenewSessionLock(ctx, "sq", a); err != nil { // the watch did not end a live lock
		t.Fatalf("renew: %v", err)
	}
	if ended(a) {
		t.Fatal("Ended closed while the lock held")
	}
	r.remote.Clock.Advance(11 * time.Second)
	waitEnded(a, "the lock expired")

	// The holder closes it.
	bl := accept("b")
	if err := b.CloseSession("sq", bl); err != nil {
		t.Fatal(err)
	}
	waitEnded(bl, "CloseSession")

	// The connection to the node holding it breaks.
	c := accept("c")
	if ended(c) {
		t.Fatal("Ended closed at once")
	}
	r.srv.Close()
	waitEnded(c, "the connection broke")
}

// waitWatching waits until srv has a call under way: the watch of a
// session lock, which waits there as long as the lock holds.
func waitWatching(t *testing.T, srv *Server) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		srv.mu.Lock()
		n := 0
		for c := range srv.conns {
			c.mu.Lock()
			n += len(c.calls)
			c.mu.Unlock()
		}
		srv.mu.Unlock()
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no watch of the session lock under way within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

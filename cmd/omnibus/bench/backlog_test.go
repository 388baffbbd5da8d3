package bench

import (
	"context"
	"testing"
)

func TestBacklogGateHoldsSendersAtTheBound(t *testing.T) {
	done, cancel := context.WithCancel(t.Context())
	cancel() // a sender that would have to wait gives up at once
	g := newBacklogGate(3)
	for i := range 3 {
		if !g.admit(done) {
			t.Fatalf("send %d of 3 held back under the bound", i+1)
		}
	}
	if g.admit(done) {
		t.Fatal("a fourth send admitted with 3 sent and none received, bound 3")
	}
	g.delivered()
	if !g.admit(done) {
		t.Fatal("no send admitted after a delivery made room")
	}
	if g.admit(done) {
		t.Fatal("a second send admitted for one delivery")
	}

	// A sender waiting for room is woken by the next delivery.
	admitted := make(chan bool)
	go func() { admitted <- g.admit(t.Context()) }()
	for waiting := false; !waiting; {
		g.mu.Lock()
		waiting = g.freed != nil
		g.mu.Unlock()
	}
	g.delivered()
	if !<-admitted {
		t.Fatal("the waiting sender was not admitted after a delivery")
	}

	var none *backlogGate // --max-backlog 0
	for range 5 {
		if !none.admit(done) {
			t.Fatal("no bound, yet a send was held back")
		}
	}
	none.delivered()
}

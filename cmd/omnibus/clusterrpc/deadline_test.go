package clusterrpc

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
)

// earlyCtx ends with DeadlineExceeded at its own (near) deadline while
// Deadline reports a later one, which the call carries to the server: the
// race of two waits for one instant, decided for this side.
type earlyCtx struct {
	context.Context
	sent time.Time
}

func (c earlyCtx) Deadline() (time.Time, bool) { return c.sent, true }

// TestRemoteWaitEndedByTheDeadlineHere: a blocking call whose deadline
// passes here first is cancelled at the server, which answers "context
// canceled"; the call returns what a local one returns when its wait
// runs out: a receive nothing and no error, an accept of a session a
// timeout.
func TestRemoteWaitEndedByTheDeadlineHere(t *testing.T) {
	r := newRig(t)
	b := r.routed
	if _, err := b.CreateEntity(t.Context(), core.Entity{Kind: core.KindQueue, Name: "q"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateEntity(t.Context(), core.Entity{Kind: core.KindQueue, Name: "sq", RequiresSession: true}); err != nil {
		t.Fatal(err)
	}
	early := func() (context.Context, context.CancelFunc) {
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		return earlyCtx{Context: ctx, sent: time.Now().Add(time.Minute)}, cancel
	}
	ctx, cancel := early()
	msgs, err := b.Receive(ctx, "q", core.ReceiveOptions{Max: 1})
	cancel()
	if err != nil || len(msgs) != 0 {
		t.Fatalf("a receive whose deadline passed here first: %v, %v; want nothing and no error", msgs, err)
	}
	ctx, cancel = early()
	_, err = b.AcceptSession(ctx, "sq", "")
	cancel()
	var ce *core.Error
	if !errors.As(err, &ce) || ce.Code != core.CodeTimeout {
		t.Fatalf("an accept whose deadline passed here first: %v; want a timeout", err)
	}
}

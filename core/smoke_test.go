package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

func TestSmokePeekLockComplete(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	env.MustSend(t, "q", coretest.Text("a"), coretest.Text("b"))
	ctx := t.Context()
	msgs, err := env.Broker.Receive(ctx, "q", core.ReceiveOptions{Mode: core.PeekLock, Max: 10})
	if err != nil || len(msgs) != 2 {
		t.Fatalf("receive: %v %d", err, len(msgs))
	}
	if string(msgs[0].Body) != "a" || msgs[0].SequenceNumber != 1 || msgs[0].DeliveryCount != 1 {
		t.Fatalf("got %+v", msgs[0])
	}
	if err := env.Broker.Settle(ctx, "q", msgs[0].LockToken, core.Outcome{Kind: core.Complete}); err != nil {
		t.Fatal(err)
	}
	if err := env.Broker.Settle(ctx, "q", msgs[0].LockToken, core.Outcome{Kind: core.Complete}); !errors.Is(err, core.ErrLockLost) {
		t.Fatalf("second complete: %v", err)
	}
	env.Clock.Advance(61 * time.Second)
	again, err := env.Broker.Receive(ctx, "q", core.ReceiveOptions{Mode: core.PeekLock})
	if err != nil || len(again) != 1 || string(again[0].Body) != "b" || again[0].DeliveryCount != 2 {
		t.Fatalf("after expiry: %v %+v", err, again)
	}
	c, _ := env.Broker.Counts("q")
	if c.Active != 1 {
		t.Fatalf("counts %+v", c)
	}
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	none, err := env.Broker.Receive(short, "q", core.ReceiveOptions{})
	if err != nil || len(none) != 0 {
		t.Fatalf("empty receive: %v %v", err, none)
	}
}

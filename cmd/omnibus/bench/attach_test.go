package bench

import (
	"context"
	"errors"
	"testing"

	"github.com/Azure/go-amqp"
)

func TestAttachRetryingAsksAgainOnlyWhenBusy(t *testing.T) {
	busy := &amqp.Error{Condition: "com.microsoft:server-busy", Description: "this node does not lead the entity's group now; retry"}
	calls := 0
	err := attachRetrying(context.Background(), func() error {
		calls++
		if calls < 3 {
			return busy
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("busy twice, then attached: err %v after %d calls, want nil after 3", err, calls)
	}

	notFound := &amqp.Error{Condition: amqp.ErrCondNotFound}
	calls = 0
	err = attachRetrying(context.Background(), func() error { calls++; return notFound })
	if !errors.Is(err, notFound) || calls != 1 {
		t.Fatalf("not found: err %v after %d calls, want it at once", err, calls)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls = 0
	err = attachRetrying(ctx, func() error { calls++; return busy })
	if !errors.Is(err, busy) || calls != 1 {
		t.Fatalf("busy with the context done: err %v after %d calls, want the busy error at once", err, calls)
	}
}

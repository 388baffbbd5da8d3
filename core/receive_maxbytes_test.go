package core_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// TestReceiveMaxBytes bounds a batch by the messages' sizes: it ends
// before the message that would exceed MaxBytes, but always takes one.
func TestReceiveMaxBytes(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	five := func() []*core.Message {
		var msgs []*core.Message
		for range 5 {
			msgs = append(msgs, &core.Message{Body: bytes.Repeat([]byte{'x'}, 1000)})
		}
		return msgs
	}
	env.MustSend(t, "q", five()...) // 5: the last case takes what is left
	for _, c := range []struct{ maxBytes, want int }{{2500, 2}, {500, 1}, {0, 2}} {
		got, err := env.Broker.Receive(t.Context(), "q", core.ReceiveOptions{Mode: core.ReceiveAndDelete, Max: 10, MaxBytes: c.maxBytes})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != c.want {
			t.Errorf("MaxBytes %d took %d messages, want %d", c.maxBytes, len(got), c.want)
		}
	}

	// A waiting receive is served within its bound too.
	type result struct {
		msgs []*core.Message
		err  error
	}
	res := make(chan result, 1)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		msgs, err := env.Broker.Receive(ctx, "q", core.ReceiveOptions{Mode: core.PeekLock, Max: 10, MaxBytes: 2500})
		res <- result{msgs, err}
	}()
	core.WaitForWaiters(env.Broker, "q", 1)
	env.MustSend(t, "q", five()...)
	r := <-res
	if r.err != nil || len(r.msgs) != 2 {
		t.Errorf("waiting receive got %d messages (%v), want 2", len(r.msgs), r.err)
	}
}

package core_test

import (
	"errors"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

func exists(t *testing.T, env *coretest.Env, path string) bool {
	t.Helper()
	_, err := env.Broker.GetEntity(path)
	if err != nil && !errors.Is(err, core.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

func TestAutoDeleteIdleQueue(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q", AutoDeleteOnIdle: 5 * time.Minute})
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "keep"})
	env.MustSend(t, "q", coretest.Text("x"))
	env.Clock.Advance(4 * time.Minute)
	// A peek is a use: the idle period starts again.
	if _, err := env.Broker.Peek(t.Context(), "q", core.PeekOptions{}); err != nil {
		t.Fatal(err)
	}
	env.Clock.Advance(4 * time.Minute)
	if !exists(t, env, "q") {
		t.Fatal("queue deleted 4 minutes after a peek, with AutoDeleteOnIdle 5m")
	}
	env.Clock.Advance(time.Minute)
	if exists(t, env, "q") {
		t.Fatal("queue idle for 5 minutes was not deleted")
	}
	if !exists(t, env, "keep") {
		t.Error("queue without AutoDeleteOnIdle was deleted")
	}
}

func TestAutoDeleteNotIdle(t *testing.T) {
	env := coretest.New(t)
	idle := 5 * time.Minute
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "sched", AutoDeleteOnIdle: idle})
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "target"})
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "fwd", AutoDeleteOnIdle: idle, ForwardTo: "target"})
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "listened", AutoDeleteOnIdle: idle})
	m := coretest.Text("later")
	m.ScheduledEnqueueTime = coretest.Epoch.Add(20 * time.Minute)
	env.MustSend(t, "sched", m)
	ch := startReceive(t.Context(), env.Broker, "listened", core.ReceiveOptions{})
	core.WaitForWaiters(env.Broker, "listened", 1)
	env.Clock.Advance(10 * time.Minute)
	for _, p := range []string{"sched", "fwd", "listened"} {
		if !exists(t, env, p) {
			t.Errorf("%s deleted while not idle", p)
		}
	}
	env.MustSend(t, "listened", coretest.Text("x"))
	<-ch
	// Once the scheduled message is delivered and the receiver gone, idling starts.
	env.Clock.Advance(10 * time.Minute)
	env.MustReceive(t, "sched", core.ReceiveAndDelete, 1)
	env.Clock.Advance(idle)
	for _, p := range []string{"sched", "listened"} {
		if exists(t, env, p) {
			t.Errorf("%s still exists after idling", p)
		}
	}
	if !exists(t, env, "fwd") {
		t.Error("a forwarding queue never idles")
	}
}

func TestAutoDeleteTopicAndSubscriptions(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t", AutoDeleteOnIdle: 10 * time.Minute})
	env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "busy"})
	env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "idle", AutoDeleteOnIdle: 5 * time.Minute})
	// Sends to the topic do not keep a subscription alive; receives do.
	for range 3 {
		env.Clock.Advance(3 * time.Minute)
		env.MustSend(t, "t", coretest.Text("x"))
		env.MustReceive(t, "t/Subscriptions/busy", core.ReceiveAndDelete, 1)
	}
	if exists(t, env, "t/Subscriptions/idle") {
		t.Error("subscription without receives for 9 minutes survived AutoDeleteOnIdle 5m")
	}
	// Receiving from a subscription is an operation on the topic too.
	for range 4 {
		env.Clock.Advance(4 * time.Minute)
		env.MustReceive(t, "t/Subscriptions/busy", core.ReceiveAndDelete, 1)
	}
	if !exists(t, env, "t") {
		t.Fatal("topic deleted while its subscription was in use")
	}
	env.Clock.Advance(10 * time.Minute)
	if exists(t, env, "t") || exists(t, env, "t/Subscriptions/busy") {
		t.Error("idle topic (and its subscriptions) not deleted")
	}
}

func TestAutoDeleteAfterRestartAndUpdate(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	// Turning it on by update arms the check.
	if _, err := env.Broker.UpdateEntity(t.Context(), core.Entity{Kind: core.KindQueue, Name: "q", AutoDeleteOnIdle: time.Hour}); err != nil {
		t.Fatal(err)
	}
	env.Clock.Advance(30 * time.Minute)
	env.Restart(t)
	env.Clock.Advance(59 * time.Minute)
	if !exists(t, env, "q") {
		t.Fatal("idleness must restart with the broker")
	}
	env.Clock.Advance(time.Minute)
	if exists(t, env, "q") {
		t.Error("queue idle for an hour after a restart was not deleted")
	}
}

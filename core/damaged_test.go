package core_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/storage"
)

// damageEnv is a broker on a fault store holding queue q with n messages
// "m1".."mn", restarted so that no body is cached in memory: every
// receive reads the store.
func damageEnv(t *testing.T, path string, n int) (*coretest.Env, *coretest.FaultStore) {
	t.Helper()
	env, fs := coretest.NewFault(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	env.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "a"})
	env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "b"})
	to := path
	if path != "q" {
		to = "t"
	}
	for i := 1; i <= n; i++ {
		env.MustSend(t, to, coretest.Text(fmt.Sprintf("m%d", i)))
	}
	env.Restart(t)
	return env, fs
}

// overwrite replaces a stored value behind the broker's back, as a
// damaged disk does.
func overwrite(t *testing.T, fs *coretest.FaultStore, key, v []byte) {
	t.Helper()
	var b storage.Batch
	if v == nil {
		b.Delete(key)
	} else {
		b.Set(key, v)
	}
	if err := fs.Store.Apply(&b); err != nil {
		t.Fatal(err)
	}
}

// receiveAll takes every message of path, a few at a time, completing
// the peek-locked ones, and returns the bodies in order.
func receiveAll(t *testing.T, env *coretest.Env, path string, mode core.ReceiveMode) []string {
	t.Helper()
	var out []string
	for {
		got, err := env.Broker.Receive(coretest.Now(t), path, core.ReceiveOptions{Mode: mode, Max: 3})
		if err != nil {
			t.Fatalf("receive from %s: %v", path, err)
		}
		if len(got) == 0 {
			return out
		}
		for _, m := range got {
			out = append(out, string(m.Body))
			if mode == core.PeekLock {
				env.MustSettle(t, path, m.LockToken, core.Outcome{Kind: core.Complete})
			}
		}
	}
}

func wantFlow(t *testing.T, got []string, n, skip int) {
	t.Helper()
	var want []string
	for i := 1; i <= n; i++ {
		if i != skip {
			want = append(want, fmt.Sprintf("m%d", i))
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("received %v, want %v", got, want)
	}
}

// checkQuarantined checks that the dead-letter subqueue of path holds one
// message, seq, with ReasonBodyUnreadable and the bytes that were read.
func checkQuarantined(t *testing.T, env *coretest.Env, path string, seq int64, body string) {
	t.Helper()
	got := env.MustReceive(t, path+"/$DeadLetterQueue", core.ReceiveAndDelete, 10)
	if len(got) != 1 {
		t.Fatalf("dead-letter subqueue of %s holds %d messages, want 1", path, len(got))
	}
	m := got[0]
	if m.SequenceNumber != seq || m.ApplicationProperties["DeadLetterReason"] != core.ReasonBodyUnreadable ||
		m.ApplicationProperties["DeadLetterErrorDescription"] == "" || string(m.Body) != body {
		t.Fatalf("quarantined message: seq %d, properties %v, body %q; want seq %d, reason %s, body %q",
			m.SequenceNumber, m.ApplicationProperties, m.Body, seq, core.ReasonBodyUnreadable, body)
	}
}

// A body that cannot be read — cut in half, garbled, reported corrupt by
// the store, or gone — moves its message to the dead-letter subqueue; the
// rest of the queue flows, in order, in both receive modes.
func TestUnreadableBodyIsDeadLetteredAndTheQueueFlows(t *testing.T) {
	for _, mode := range []core.ReceiveMode{core.PeekLock, core.ReceiveAndDelete} {
		for _, damage := range []string{"truncated", "garbled", "corrupt", "missing"} {
			t.Run(fmt.Sprintf("%s/mode-%d", damage, mode), func(t *testing.T) {
				env, fs := damageEnv(t, "q", 10)
				key := core.BodyKey(env.Broker, "q", 4)
				v, err := fs.Get(key)
				if err != nil {
					t.Fatal(err)
				}
				var left string // what the store still gives back
				switch damage {
				case "truncated":
					v = v[:len(v)/2]
					overwrite(t, fs, key, v)
					left = string(v)
				case "garbled":
					v = []byte("\x07 not a body record")
					overwrite(t, fs, key, v)
					left = string(v)
				case "corrupt":
					fs.FailKey(key, fmt.Errorf("test disk: checksum mismatch: %w", storage.ErrCorrupt))
				case "missing":
					overwrite(t, fs, key, nil)
				}
				wantFlow(t, receiveAll(t, env, "q", mode), 10, 4)
				if n := core.TimerEntries(env.Broker, "q"); n != 0 {
					t.Errorf("%d timer entries left: the quarantined message's lock left its entry behind", n)
				}
				fs.Heal()
				checkQuarantined(t, env, "q", 4, left)
				mustCheck(t, env, "after draining the dead-letter subqueue")
			})
		}
	}
}

// The case: a subscription's copy whose shared body is gone no
// longer fails every receive and returns to the head of its queue.
func TestSubscriptionCopyWithoutItsBodyDoesNotBlock(t *testing.T) {
	env, fs := damageEnv(t, "t/Subscriptions/a", 5)
	overwrite(t, fs, core.BodyKey(env.Broker, "t/Subscriptions/a", 2), nil)
	wantFlow(t, receiveAll(t, env, "t/Subscriptions/a", core.PeekLock), 5, 2)
	checkQuarantined(t, env, "t/Subscriptions/a", 2, "")
	// b's copy of the same message lost its body too: it follows.
	wantFlow(t, receiveAll(t, env, "t/Subscriptions/b", core.ReceiveAndDelete), 5, 2)
	checkQuarantined(t, env, "t/Subscriptions/b", 2, "")
	mustCheck(t, env, "after draining both subscriptions")
}

// A store that cannot read right now is not damage: the receive fails
// with server-busy, nothing moves, and once the store recovers the
// message is delivered.
func TestUnavailableBodyReadFailsTheReceiveOnly(t *testing.T) {
	env, fs := damageEnv(t, "q", 3)
	fault := fmt.Errorf("test disk: %w", storage.ErrUnavailable)
	fs.FailKey(core.BodyKey(env.Broker, "q", 1), fault)
	for _, mode := range []core.ReceiveMode{core.PeekLock, core.ReceiveAndDelete} {
		_, err := env.Broker.Receive(coretest.Now(t), "q", core.ReceiveOptions{Mode: mode, Max: 3})
		if core.CodeOf(err) != core.CodeServerBusy || !errors.Is(err, fault) {
			t.Fatalf("receive over an unreadable store: %v, want server-busy", err)
		}
	}
	if c := env.MustCounts(t, "q"); c.Active != 3 || c.DeadLetter != 0 {
		t.Fatalf("counts after failed receives: %+v", c)
	}
	fs.Heal()
	mustCheck(t, env, "after failed receives")
	wantFlow(t, receiveAll(t, env, "q", core.PeekLock), 3, 0)
	mustCheck(t, env, "after the store recovered")
}

// The read-ahead meets a damaged body in the backlog: it neither panics
// nor stops the queue; the receive that takes the message quarantines it.
func TestReadAheadOverDamagedBodies(t *testing.T) {
	env, fs := damageEnv(t, "q", 300)
	for _, seq := range []int64{150, 151, 220} {
		key := core.BodyKey(env.Broker, "q", seq)
		v, err := fs.Get(key)
		if err != nil {
			t.Fatal(err)
		}
		overwrite(t, fs, key, v[:len(v)/3])
	}
	var got []string
	for {
		msgs, err := env.Broker.Receive(coretest.Now(t), "q", core.ReceiveOptions{Mode: core.ReceiveAndDelete, Max: 100})
		if err != nil {
			t.Fatal(err)
		}
		core.WaitForReadAhead(env.Broker, "q")
		if len(msgs) == 0 {
			break
		}
		got = append(got, coretest.Bodies(msgs)...)
	}
	if len(got) != 297 || got[0] != "m1" || got[296] != "m300" {
		t.Fatalf("received %d messages (%v … %v), want 297", len(got), got[:1], got[len(got)-1:])
	}
	if c := env.MustCounts(t, "q"); c.DeadLetter != 3 || c.Active != 0 {
		t.Fatalf("counts %+v, want the 3 damaged messages dead-lettered", c)
	}
	mustCheck(t, env, "after the backlog")
}

// A damaged body in a dead-letter subqueue is replaced in place by its
// stub, which is then delivered.
func TestDamagedBodyInDeadLetterSubqueue(t *testing.T) {
	env, fs := damageEnv(t, "q", 1)
	m := env.MustReceive(t, "q", core.PeekLock, 1)[0]
	env.MustSettle(t, "q", m.LockToken, core.Outcome{Kind: core.DeadLetter, DeadLetterReason: "test"})
	env.Restart(t)
	overwrite(t, fs, core.BodyKey(env.Broker, "q/$DeadLetterQueue", 1), []byte("x"))
	got := env.MustReceive(t, "q/$DeadLetterQueue", core.PeekLock, 1)
	if len(got) != 1 || got[0].ApplicationProperties["DeadLetterReason"] != core.ReasonBodyUnreadable || string(got[0].Body) != "x" {
		t.Fatalf("damaged dead letter: %+v", got)
	}
	env.MustSettle(t, "q/$DeadLetterQueue", got[0].LockToken, core.Outcome{Kind: core.Complete})
	mustCheck(t, env, "after completing the stub")
}

// A settlement that must rewrite a body (properties on abandon or defer)
// that became unreadable after delivery dead-letters the message instead;
// the settlement succeeds.
func TestSettleRewritingDamagedBody(t *testing.T) {
	for _, kind := range []core.OutcomeKind{core.Abandon, core.Defer} {
		env, fs := damageEnv(t, "q", 2)
		m := env.MustReceive(t, "q", core.PeekLock, 1)[0]
		overwrite(t, fs, core.BodyKey(env.Broker, "q", 1), nil)
		env.MustSettle(t, "q", m.LockToken, core.Outcome{Kind: kind, Properties: map[string]any{"k": "v"}})
		if c := env.MustCounts(t, "q"); c.DeadLetter != 1 || c.Active != 1 {
			t.Fatalf("%v of a damaged message: counts %+v", kind, c)
		}
		mustCheck(t, env, "after the settlement")
	}
}

// Peek skips a message whose body cannot be read (a receive will move
// it); the others are browsed.
func TestPeekSkipsDamagedBody(t *testing.T) {
	env, fs := damageEnv(t, "q", 3)
	overwrite(t, fs, core.BodyKey(env.Broker, "q", 2), []byte{1, 2, 3})
	got, err := env.Broker.Peek(t.Context(), "q", core.PeekOptions{Max: 10})
	if err != nil || len(got) != 2 || got[0].SequenceNumber != 1 || got[1].SequenceNumber != 3 {
		t.Fatalf("peek over a damaged body: %v %v", got, err)
	}
}

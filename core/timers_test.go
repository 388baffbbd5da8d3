package core_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// Timer entries leave with their lock: after 100k receive + complete
// cycles the queue's timers hold an entry for each lock still held, not
// one for every lock ever taken (issue 14: 100k cycles left 100k
// entries).
func TestLockTimersLeaveWithTheirLocks(t *testing.T) {
	env := coretest.New(t)
	br := env.Broker
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	const n, held = 100_000, 7
	for i := 0; i < n; i += 1000 {
		msgs := make([]*core.Message, 1000)
		for j := range msgs {
			msgs[j] = coretest.Text("m")
		}
		env.MustSend(t, "q", msgs...)
	}
	for done := 0; done < n-held; {
		got := env.MustReceive(t, "q", core.PeekLock, min(100, n-held-done))
		toks := make([]core.LockToken, 0, len(got))
		for i, m := range got {
			if i%10 == 0 {
				// Every tenth by Settle, the others in one batch: both
				// ways of completing.
				env.MustSettle(t, "q", m.LockToken, core.Outcome{Kind: core.Complete})
				continue
			}
			toks = append(toks, m.LockToken)
		}
		for _, err := range br.CompleteMany("q", toks, true) {
			if err != nil {
				t.Fatal(err)
			}
		}
		done += len(got)
	}
	if got := core.TimerEntries(br, "q"); got != 0 {
		t.Fatalf("after %d receive+complete cycles the queue holds %d timer entries, want 0", n-held, got)
	}
	env.MustReceive(t, "q", core.PeekLock, held)
	if got := core.TimerEntries(br, "q"); got != held {
		t.Errorf("with %d locks held the queue holds %d timer entries", held, got)
	}
	if got := core.BrokerTimerEntries(br); got != 1 {
		t.Errorf("broker timer holds %d entries for one queue, want 1", got)
	}
}

// Every way a lock ends takes its entry along; a renewal moves it.
func TestLockTimerEntryPerOutcome(t *testing.T) {
	env := coretest.New(t)
	br := env.Broker
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q", LockDuration: 30 * time.Second})
	outcomes := []core.Outcome{
		{Kind: core.Complete}, {Kind: core.Abandon}, {Kind: core.Release},
		{Kind: core.Defer}, {Kind: core.DeadLetter, DeadLetterReason: "r"},
	}
	for _, o := range outcomes {
		env.MustSend(t, "q", coretest.Text("m"))
		m := env.MustReceive(t, "q", core.PeekLock, 1)[0]
		for range 100 {
			env.Clock.Advance(time.Second)
			if _, err := br.RenewLock(t.Context(), "q", m.LockToken); err != nil {
				t.Fatal(err)
			}
		}
		if got := core.TimerEntries(br, "q"); got != 1 {
			t.Errorf("one lock renewed 100 times: %d timer entries, want 1", got)
		}
		env.MustSettle(t, "q", m.LockToken, o)
		if got := core.TimerEntries(br, "q"); got != 0 {
			t.Errorf("after outcome %d: %d timer entries, want 0", o.Kind, got)
		}
		// Clean up what the outcome left for the next round.
		for _, r := range env.MustReceive(t, "q", core.ReceiveAndDelete, 10) {
			_ = r
		}
	}

	// An expired lock leaves with its expiry; a renewed one is not
	// expired at its first due time.
	env.MustSend(t, "q", coretest.Text("x"), coretest.Text("y"))
	got := env.MustReceive(t, "q", core.PeekLock, 2)
	env.Clock.Advance(20 * time.Second)
	if _, err := br.RenewLock(t.Context(), "q", got[1].LockToken); err != nil {
		t.Fatal(err)
	}
	env.Clock.Advance(11 * time.Second) // past the first lock, not the renewed one
	core.Quiesce(br)
	if err := br.Settle(t.Context(), "q", got[0].LockToken, core.Outcome{Kind: core.Complete}); !errors.Is(err, core.ErrLockLost) {
		t.Errorf("settle after expiry: %v, want lock lost", err)
	}
	if got := core.TimerEntries(br, "q"); got != 1 {
		t.Errorf("one live lock: %d timer entries, want 1", got)
	}
	env.MustSettle(t, "q", got[1].LockToken, core.Outcome{Kind: core.Complete})
	if got := core.TimerEntries(br, "q"); got != 0 {
		t.Errorf("no lock: %d timer entries, want 0", got)
	}
}

// Session locks: one entry per held session lock, however often renewed;
// none once closed or expired.
func TestSessionLockTimerEntries(t *testing.T) {
	env := coretest.New(t)
	br := env.Broker
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q", RequiresSession: true, LockDuration: 30 * time.Second})
	for i := range 1000 {
		env.MustSend(t, "q", &core.Message{Body: []byte("m"), SessionID: fmt.Sprintf("s%d", i%10)})
	}
	for range 100 {
		for s := range 10 {
			sl, err := br.AcceptSession(t.Context(), "q", fmt.Sprintf("s%d", s))
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if _, err := br.RenewSessionLock(t.Context(), "q", sl); err != nil {
					t.Fatal(err)
				}
			}
			got, err := br.Receive(coretest.Now(t), "q", core.ReceiveOptions{Session: sl, Max: 1})
			if err != nil || len(got) != 1 {
				t.Fatalf("receive in session: %d, %v", len(got), err)
			}
			env.MustSettle(t, "q", got[0].LockToken, core.Outcome{Kind: core.Complete})
			if err := br.CloseSession("q", sl); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := core.TimerEntries(br, "q"); got != 0 {
		t.Fatalf("after 1000 accept/renew/close cycles: %d timer entries, want 0", got)
	}

	// Held locks: one entry each; expiry takes them; an expired lock
	// accepted again before its tick keeps one entry.
	sl, err := br.AcceptSession(t.Context(), "q", "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := br.AcceptSession(t.Context(), "q", "b"); err != nil {
		t.Fatal(err)
	}
	if got := core.TimerEntries(br, "q"); got != 2 {
		t.Errorf("two session locks: %d timer entries, want 2", got)
	}
	env.Clock.Advance(31 * time.Second)
	core.Quiesce(br)
	if got := core.TimerEntries(br, "q"); got != 0 {
		t.Errorf("after expiry: %d timer entries, want 0", got)
	}
	if _, err := br.RenewSessionLock(t.Context(), "q", sl); err == nil {
		t.Error("renewing an expired session lock succeeded")
	}
}

// Cancelled scheduled messages leave the timers; a deleted queue leaves
// the broker timer.
func TestScheduledTimerEntries(t *testing.T) {
	env := coretest.New(t)
	br := env.Broker
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	far := env.Clock.Now().Add(24 * time.Hour)
	var seqs []int64
	for i := range 1000 {
		// Descending times: each one is earlier than every other so far.
		m := &core.Message{Body: []byte("m"), ScheduledEnqueueTime: far.Add(-time.Duration(i) * time.Second)}
		seqs = append(seqs, env.MustSend(t, "q", m)...)
	}
	if got := core.TimerEntries(br, "q"); got != 1000 {
		t.Errorf("1000 scheduled: %d timer entries", got)
	}
	if got := core.BrokerTimerEntries(br); got != 1 {
		t.Errorf("broker timer holds %d entries for one queue, want 1", got)
	}
	if err := br.CancelScheduled(t.Context(), "q", seqs[:999]); err != nil {
		t.Fatal(err)
	}
	if got := core.TimerEntries(br, "q"); got != 1 {
		t.Errorf("one left scheduled: %d timer entries, want 1", got)
	}
	if err := br.DeleteEntity(t.Context(), "q"); err != nil {
		t.Fatal(err)
	}
	if got := core.BrokerTimerEntries(br); got != 0 {
		t.Errorf("deleted queue still in the broker timer (%d entries)", got)
	}
}

// The consistency checker notices a leaked timer entry and a lock
// without one.
func TestCheckFindsTimerFaults(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	env.MustSend(t, "q", coretest.Text("a"), coretest.Text("b"))
	env.MustReceive(t, "q", core.PeekLock, 1)
	if err := env.Broker.Check(); err != nil {
		t.Fatalf("a sound queue: %v", err)
	}
	core.BreakTimers(env.Broker, "q")
	err := env.Broker.Check()
	if err == nil || !strings.Contains(err.Error(), "a timer entry for neither a lock nor its schedule") ||
		!strings.Contains(err.Error(), "is locked without a timer entry") {
		t.Errorf("check after breaking the timers: %v", err)
	}
}

package core_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/storage"
)

// Competing receivers never get the same message while it is locked.
func TestPeekLockExclusiveUnderConcurrency(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	const n = 200
	msgs := make([]*core.Message, n)
	for i := range msgs {
		msgs[i] = coretest.Text("m")
	}
	env.MustSend(t, "q", msgs...)
	var mu sync.Mutex
	seen := map[int64]int{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				got, err := env.Broker.Receive(coretest.Now(t), "q", core.ReceiveOptions{Max: 3})
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, m := range got {
					seen[m.SequenceNumber]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != n {
		t.Errorf("%d distinct messages delivered, want %d", len(seen), n)
	}
	for seq, k := range seen {
		if k != 1 {
			t.Errorf("message %d delivered %d times under lock", seq, k)
		}
	}
}

// Of concurrent settlements of one lock, exactly one wins.
func TestConcurrentSettleOneWins(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	for range 20 {
		env.MustSend(t, "q", coretest.Text("m"))
		m := env.MustReceive(t, "q", core.PeekLock, 1)[0]
		var ok, lost atomic.Int32
		var wg sync.WaitGroup
		for _, k := range []core.OutcomeKind{core.Complete, core.Abandon, core.DeadLetter, core.Defer} {
			wg.Go(func() {
				err := env.Broker.Settle(t.Context(), "q", m.LockToken, core.Outcome{Kind: k})
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, core.ErrLockLost):
					lost.Add(1)
				default:
					t.Errorf("settle %v: %v", k, err)
				}
			})
		}
		wg.Wait()
		if ok.Load() != 1 || lost.Load() != 3 {
			t.Fatalf("%d settlements won, %d lost the lock; want 1 and 3", ok.Load(), lost.Load())
		}
		// Leave the queue empty for the next round.
		env.MustReceive(t, "q", core.ReceiveAndDelete, 5)
		env.MustReceive(t, "q/$DeadLetterQueue", core.ReceiveAndDelete, 5)
		if c := env.MustCounts(t, "q"); c.Deferred == 1 {
			d, err := env.Broker.ReceiveDeferred(t.Context(), "q", core.ReceiveAndDelete, []int64{m.SequenceNumber})
			if err != nil || len(d) != 1 {
				t.Fatalf("deferred: %v %v", err, d)
			}
		}
		if c := env.MustCounts(t, "q"); c.Total != 0 {
			t.Fatalf("counts %+v, want empty", c)
		}
	}
}

// Asking twice for the same deferred message in one call locks it once.
func TestReceiveDeferredDuplicateSequenceNumbers(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q", LockDuration: 10 * time.Second})
	env.MustSend(t, "q", coretest.Text("m"))
	m := env.MustReceive(t, "q", core.PeekLock, 1)[0]
	env.MustSettle(t, "q", m.LockToken, core.Outcome{Kind: core.Defer})
	got, err := env.Broker.ReceiveDeferred(t.Context(), "q", core.PeekLock, []int64{1, 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].DeliveryCount != 2 {
		t.Fatalf("ReceiveDeferred([1 1]) returned %d messages (dc %v), want the message once", len(got), seqsOf(got))
	}
	env.MustSettle(t, "q", got[0].LockToken, core.Outcome{Kind: core.Complete})
	if c := env.MustCounts(t, "q"); c.Total != 0 {
		t.Errorf("after completing: %+v", c)
	}
}

// A send whose context is cancelled either fails without storing or
// succeeds: it never stores the message and reports failure, which would
// make a retrying client store it twice.
func TestSendWithCancelledContext(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := env.Broker.Send(ctx, "q", coretest.Text("m"))
	c := env.MustCounts(t, "q")
	if err != nil && c.Total != 0 {
		t.Errorf("send returned %v but stored the message (%+v)", err, c)
	}
	if err == nil && c.Total != 1 {
		t.Errorf("send succeeded but stored %+v", c)
	}
}

// Lock expiry and renewal with the session lock as the umbrella: message
// locks taken in a session end with it.
func TestMessageLockEndsWithSessionLock(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q", RequiresSession: true, LockDuration: 10 * time.Second})
	env.MustSend(t, "q", &core.Message{Body: []byte("x"), SessionID: "s"})
	sl, err := env.Broker.AcceptSession(t.Context(), "q", "s")
	if err != nil {
		t.Fatal(err)
	}
	m, err := env.Broker.Receive(coretest.Now(t), "q", core.ReceiveOptions{Session: sl})
	if err != nil || len(m) != 1 {
		t.Fatal(err, m)
	}
	env.Clock.Advance(8 * time.Second)
	if _, err := env.Broker.RenewSessionLock(t.Context(), "q", sl); err != nil {
		t.Fatal(err)
	}
	env.Clock.Advance(8 * time.Second) // past the first lock, within the renewed one
	if until, err := env.Broker.RenewLock(t.Context(), "q", m[0].LockToken); err != nil || !until.Equal(sl.LockedUntil) {
		t.Errorf("renew message lock in a session: %v %v, want the session lock's %v", until, err, sl.LockedUntil)
	}
	env.MustSettle(t, "q", m[0].LockToken, core.Outcome{Kind: core.Complete})
}

// holdStore holds the next Apply after hold until the test lets it go,
// so that a write stays in flight while the test acts.
type holdStore struct {
	storage.Store
	armed   atomic.Bool
	held    chan struct{} // receives once the held Apply has arrived
	release chan struct{} // closed to let it go
}

func newHoldStore(t *testing.T) (*coretest.Env, *holdStore) {
	hs := &holdStore{held: make(chan struct{}), release: make(chan struct{})}
	env := coretest.NewWith(t, func(t testing.TB, prev storage.Store) storage.Store {
		if hs.Store == nil {
			hs.Store = coretest.MemOpener(t, nil)
		}
		return hs
	})
	return env, hs
}

func (h *holdStore) hold() { h.armed.Store(true) }

func (h *holdStore) Apply(b *storage.Batch) error {
	if h.armed.CompareAndSwap(true, false) {
		h.held <- struct{}{}
		<-h.release
	}
	return h.Store.Apply(b)
}

// A lock does not end while its delivery's write (the message's new
// delivery count) is in flight, even when its time passes meanwhile:
// otherwise the message would be delivered again and settled first, and
// the late write would bring back the state record of a message that is
// gone (completed), or make a deferred one Active in the store. The lock
// ends once that write is done; the message is then delivered again.
func TestLockOutlivesItsDeliveryWrite(t *testing.T) {
	for _, tc := range []struct {
		name    string
		session bool
		retake  bool // try to take the message again during the write
		kind    core.OutcomeKind
	}{
		{"complete", false, true, core.Complete},
		{"defer", false, true, core.Defer},
		{"expires after", false, false, core.Complete},
		{"session/complete", true, true, core.Complete},
		{"session/expires after", true, false, core.Complete},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, hs := newHoldStore(t)
			b, ctx := env.Broker, t.Context()
			env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q", LockDuration: time.Minute, RequiresSession: tc.session})
			env.MustSend(t, "q", &core.Message{Body: []byte("m"), SessionID: map[bool]string{true: "s"}[tc.session]})
			accept := func() *core.SessionLock {
				if !tc.session {
					return nil
				}
				sl, err := b.AcceptSession(ctx, "q", "s")
				if err != nil {
					t.Fatal(err)
				}
				return sl
			}
			sl := accept()
			hs.hold()
			first := make(chan []*core.Message, 1)
			go func() {
				got, err := b.Receive(coretest.Now(t), "q", core.ReceiveOptions{Session: sl})
				if err != nil {
					t.Error(err)
				}
				first <- got
			}()
			<-hs.held                          // its delivery count is being written
			env.Clock.Advance(2 * time.Minute) // past the lock
			var again []*core.Message
			var err error
			switch {
			case !tc.retake:
			case !tc.session:
				again, err = b.Receive(coretest.Now(t), "q", core.ReceiveOptions{})
			default:
				var sl2 *core.SessionLock
				if sl2, err = b.AcceptSession(ctx, "q", "s"); err == nil {
					again, err = b.Receive(coretest.Now(t), "q", core.ReceiveOptions{Session: sl2})
				}
			}
			if err != nil {
				t.Error(err)
			}
			for _, m := range again {
				t.Errorf("message %d delivered again while its first delivery's write was in flight", m.SequenceNumber)
				if err := b.Settle(ctx, "q", m.LockToken, core.Outcome{Kind: tc.kind}); err != nil {
					t.Error(err)
				}
			}
			close(hs.release)
			got := <-first
			if len(got) != 1 {
				t.Fatalf("the first receive got %d messages", len(got))
			}
			if err := b.Check(); err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.session && tc.retake:
				// The session was accepted again over the lapsed lock;
				// the message lock lives under the new one, which lapses.
				env.Clock.Advance(2 * time.Minute)
			case tc.session:
				env.Clock.Advance(0) // the session lock's expiry, due now, runs
			default:
				// Its time had passed: the lock ends as the write is done.
				if err := b.Settle(ctx, "q", got[0].LockToken, core.Outcome{Kind: core.Complete}); !errors.Is(err, core.ErrLockLost) {
					t.Errorf("settling the first delivery after its lock's time: %v, want lock lost", err)
				}
				env.Clock.Advance(0) // the timers due now run
			}
			sl = accept()
			next, err := b.Receive(coretest.Now(t), "q", core.ReceiveOptions{Session: sl})
			if err != nil || len(next) != 1 || next[0].DeliveryCount != 2 {
				t.Fatalf("after the first lock ended: %v, %v; want the message with delivery count 2", next, err)
			}
			env.MustSettle(t, "q", next[0].LockToken, core.Outcome{Kind: tc.kind})
			if err := b.Check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// CloseSession while its holder's own receive is in flight (taken under
// the session lock, its delivery count not yet written) gives the messages
// back only once that write is done: taken back before, the late write
// would record a delivery that the close had undone (the store's count
// above memory's, or a delivery record the messages no longer depend
// on). After the close, the next holder gets every message, in order,
// with the delivery not counted, also after a restart (which reads the
// counts from the store alone).
func TestCloseSessionWaitsForItsDeliveryWrite(t *testing.T) {
	for _, tc := range []struct {
		n       int // 1: a state record each; minPull: a delivery record (pull.go)
		restart bool
	}{{1, false}, {4, false}, {1, true}, {4, true}} {
		n := tc.n
		t.Run(fmt.Sprintf("%d messages/restart=%v", n, tc.restart), func(t *testing.T) {
			env, hs, first, closed := closeDuringHeldReceive(t, n)
			b, ctx := env.Broker, t.Context()
			close(hs.release)
			got := <-first
			if err := <-closed; err != nil {
				t.Fatal(err)
			}
			if len(got) != n {
				t.Fatalf("the first receive got %d messages, want %d", len(got), n)
			}
			if err := b.Check(); err != nil {
				t.Fatal(err)
			}
			for _, m := range got {
				if err := b.Settle(ctx, "q", m.LockToken, core.Outcome{Kind: core.Complete}); !errors.Is(err, core.ErrLockLost) && !errors.Is(err, core.ErrSessionLockLost) {
					t.Errorf("settling message %d after its session closed: %v, want lock lost", m.SequenceNumber, err)
				}
			}
			if tc.restart {
				env.Restart(t)
				b = env.Broker
			}
			sl, err := b.AcceptSession(ctx, "q", "s")
			if err != nil {
				t.Fatal(err)
			}
			next, err := b.Receive(coretest.Now(t), "q", core.ReceiveOptions{Session: sl, Max: n})
			if err != nil || len(next) != n {
				t.Fatalf("after the close: %d messages, %v; want %d", len(next), err, n)
			}
			for i, m := range next {
				if m.SequenceNumber != got[i].SequenceNumber || m.DeliveryCount != 1 {
					t.Errorf("after the close: message %d with delivery count %d, want message %d with count 1 (a clean close does not count)",
						m.SequenceNumber, m.DeliveryCount, got[i].SequenceNumber)
				}
				env.MustSettle(t, "q", m.LockToken, core.Outcome{Kind: core.Complete})
			}
			if err := b.Check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A CloseSession whose holder's delivery write stalls does not wait past
// its bound: it returns, and the close becomes an expiry once that write
// is done. The lock then ends at once, counting the delivery as a lost
// lock does, never before the write (lock.go).
func TestCloseSessionBoundedByAStalledDeliveryWrite(t *testing.T) {
	env, hs, first, closed := closeDuringHeldReceive(t, 1)
	b, ctx := env.Broker, t.Context()
	env.Clock.Advance(core.CloseSessionWait)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	close(hs.release)
	if got := <-first; len(got) != 1 {
		t.Fatalf("the first receive got %d messages", len(got))
	}
	env.Clock.Advance(0) // the session lock's expiry, due now, runs
	if err := b.Check(); err != nil {
		t.Fatal(err)
	}
	sl, err := b.AcceptSession(ctx, "q", "s")
	if err != nil {
		t.Fatal(err)
	}
	next, err := b.Receive(coretest.Now(t), "q", core.ReceiveOptions{Session: sl})
	if err != nil || len(next) != 1 || next[0].DeliveryCount != 2 {
		t.Fatalf("after the close's bound: %v, %v; want the message with delivery count 2", next, err)
	}
	env.MustSettle(t, "q", next[0].LockToken, core.Outcome{Kind: core.Complete})
	if err := b.Check(); err != nil {
		t.Fatal(err)
	}
}

// closeDuringHeldReceive makes a session queue of n messages of session
// "s", accepts the session, starts a receive of all n whose delivery
// write the store holds, then a CloseSession of the lock, and returns
// once the close has begun (the holder has lost the lock): first gets
// the receive's messages, closed the close's result.
func closeDuringHeldReceive(t *testing.T, n int) (env *coretest.Env, hs *holdStore, first <-chan []*core.Message, closed <-chan error) {
	t.Helper()
	env, hs = newHoldStore(t)
	b, ctx := env.Broker, t.Context()
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q", LockDuration: time.Minute, RequiresSession: true})
	for range n {
		env.MustSend(t, "q", &core.Message{Body: []byte("m"), SessionID: "s"})
	}
	sl, err := b.AcceptSession(ctx, "q", "s")
	if err != nil {
		t.Fatal(err)
	}
	hs.hold()
	got := make(chan []*core.Message, 1)
	go func() {
		msgs, err := b.Receive(coretest.Now(t), "q", core.ReceiveOptions{Session: sl, Max: n})
		if err != nil {
			t.Error(err)
		}
		got <- msgs
	}()
	<-hs.held // its delivery counts are being written
	done := make(chan error, 1)
	go func() { done <- b.CloseSession("q", sl) }()
	// The holder has lost the lock once the close has begun (and, when it
	// waits, armed its bound).
	for {
		_, err := b.RenewSessionLock(ctx, "q", sl)
		if errors.Is(err, core.ErrSessionLockLost) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	return env, hs, got, done
}

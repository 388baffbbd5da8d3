package core_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/clock"
	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
)

// A pull of several peek-lock messages writes their new delivery counts in
// one delivery record (core/pull.go) instead of rewriting each state
// record. After a crash, every message still there must have the count
// decisions.md requires: a message locked at the crash the count its
// delivery gave it, a completed one gone, a released one the count its
// release took back, a deferred or abandoned one the count of its last
// delivery; and again after the recovered broker's own pulls and a second
// crash. Every write before the crash image's last fsync is kept
// (UnsyncedDataPercent 0), so the counts are exact.
func TestDeliveryCountsSurviveCrashes(t *testing.T) {
	fs, st, clk, b := openCrashable(t)
	ctx := t.Context()
	if _, err := b.CreateEntity(ctx, core.Entity{Kind: core.KindQueue, Name: "q", LockDuration: time.Minute, MaxDeliveryCount: 10}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 14; i++ {
		if _, err := b.Send(ctx, "q", coretest.Text(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	receive := func(b *core.Broker, max int) map[int64]*core.Message {
		t.Helper()
		got, err := b.Receive(coretest.Now(t), "q", core.ReceiveOptions{Mode: core.PeekLock, Max: max})
		if err != nil {
			t.Fatal(err)
		}
		out := map[int64]*core.Message{}
		for _, m := range got {
			out[m.SequenceNumber] = m
		}
		return out
	}
	settle := func(b *core.Broker, m *core.Message, k core.OutcomeKind) {
		t.Helper()
		if err := b.Settle(ctx, "q", m.LockToken, core.Outcome{Kind: k, DeadLetterReason: "r"}); err != nil {
			t.Fatalf("settle %d: %v", m.SequenceNumber, err)
		}
	}

	// Pull A: 1–8, count 1 each. 1, 2 completed; 3 abandoned (no write);
	// 4 released (count 0); 5 deferred; 6 dead-lettered; 7, 8 kept locked.
	a := receive(b, 8)
	if len(a) != 8 {
		t.Fatalf("pull A took %d", len(a))
	}
	settle(b, a[1], core.Complete)
	settle(b, a[2], core.Complete)
	settle(b, a[3], core.Abandon)
	settle(b, a[4], core.Release)
	settle(b, a[5], core.Defer)
	settle(b, a[6], core.DeadLetter)
	// Pull B: 3 (count 2), 4, 9, 10 (count 1). 9 completed, 10 released.
	pb := receive(b, 4)
	if len(pb) != 4 || pb[3] == nil || pb[10] == nil {
		t.Fatalf("pull B took %v", keys(pb))
	}
	settle(b, pb[9], core.Complete)
	settle(b, pb[10], core.Release)
	// A single delivery rewrites the state record: 10 again, count 1.
	if c := receive(b, 1); c[10] == nil || c[10].DeliveryCount != 1 {
		t.Fatalf("single delivery took %v", keys(c))
	}
	// Pull C: 11–14; 12 completed, 13 released (count 0).
	pc := receive(b, 4)
	if len(pc) != 4 || pc[11] == nil || pc[14] == nil {
		t.Fatalf("pull C took %v", keys(pc))
	}
	settle(b, pc[12], core.Complete)
	settle(b, pc[13], core.Release)

	want := map[int64]int32{3: 2, 4: 1, 5: 1, 7: 1, 8: 1, 10: 1, 11: 1, 13: 0, 14: 1}
	checkPeek(t, b, want, "before the crash")
	// A synced write makes everything before it durable.
	if _, err := b.Send(ctx, "q", coretest.Text("15")); err != nil {
		t.Fatal(err)
	}
	want[15] = 0
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	b.Close()
	st.Close()

	st2, b2 := recoverCrashed(t, crashed, clk)
	if err := b2.Check(); err != nil {
		t.Fatalf("consistency after the crash: %v", err)
	}
	checkPeek(t, b2, want, "after the crash")
	checkDelivered(t, b2, want, "after the crash")

	// The recovered broker pulls again (each count +1 from recovery's),
	// completes all but 7, which it releases, and crashes again: the
	// pull's record, which no message needs any more, is still stored
	// (its deletion waits for a write that carries it), and recovery
	// deletes it.
	again := receive(b2, 20)
	if len(again) < minPullForTest {
		t.Fatalf("the recovered broker's pull took %d", len(again))
	}
	for seq, m := range again {
		if seq == 7 {
			settle(b2, m, core.Release)
			continue
		}
		settle(b2, m, core.Complete)
		delete(want, seq)
	}
	seqs, err := b2.Send(ctx, "q", coretest.Text("16"))
	if err != nil {
		t.Fatal(err)
	}
	want[seqs[0]] = 0
	crashed2 := crashed.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	b2.Close()
	st2.Close()
	st3, b3 := recoverCrashed(t, crashed2, clk)
	if err := b3.Check(); err != nil {
		t.Fatalf("consistency after the second crash: %v", err)
	}
	checkPeek(t, b3, want, "after the second crash")
	checkDelivered(t, b3, want, "after the second crash")

	// Once every message is gone, so is every delivery record.
	for {
		got := receive(b3, 50)
		if len(got) == 0 {
			break
		}
		for _, m := range got {
			settle(b3, m, core.Complete)
		}
	}
	if _, err := b3.ReceiveDeferred(ctx, "q", core.ReceiveAndDelete, []int64{5}); err != nil {
		t.Fatal(err)
	}
	if _, err := b3.Send(ctx, "q", coretest.Text("last")); err != nil { // carries the last deletions
		t.Fatal(err)
	}
	if n := countKeys(t, st3, 'L'); n != 0 { // keys.go: 'L' delivery records
		t.Errorf("%d delivery records (or cancellations) left once the queue was drained", n)
	}
}

// checkPeek compares the delivery counts Peek shows (read from the store)
// with want, which names every message there.
func checkPeek(t *testing.T, b *core.Broker, want map[int64]int32, when string) {
	t.Helper()
	msgs, err := b.Peek(t.Context(), "q", core.PeekOptions{Max: 100})
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]int32{}
	for _, m := range msgs {
		got[m.SequenceNumber] = m.DeliveryCount
	}
	for seq, c := range want {
		if g, ok := got[seq]; !ok || g != c {
			t.Errorf("%s: peek shows message %d with delivery count %d (there: %v), want %d", when, seq, g, ok, c)
		}
	}
	for seq := range got {
		if _, ok := want[seq]; !ok {
			t.Errorf("%s: peek shows message %d, which should be gone", when, seq)
		}
	}
}

// checkDelivered receives every message of a recovered broker (none is
// locked after a restart) and the deferred one, and checks that each
// delivery raised the recovered count by one.
func checkDelivered(t *testing.T, b *core.Broker, want map[int64]int32, when string) {
	t.Helper()
	seen := map[int64]bool{}
	msgs, err := b.Receive(coretest.Now(t), "q", core.ReceiveOptions{Mode: core.PeekLock, Max: 100})
	if err != nil {
		t.Fatal(err)
	}
	def, err := b.ReceiveDeferred(t.Context(), "q", core.PeekLock, []int64{5})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range append(msgs, def...) {
		seen[m.SequenceNumber] = true
		if w := want[m.SequenceNumber] + 1; m.DeliveryCount != w {
			t.Errorf("%s: message %d delivered with count %d, want %d", when, m.SequenceNumber, m.DeliveryCount, w)
		}
		if err := b.Settle(t.Context(), "q", m.LockToken, core.Outcome{Kind: core.Release}); err != nil {
			t.Fatal(err)
		}
	}
	for seq := range want {
		if !seen[seq] {
			t.Errorf("%s: message %d not delivered", when, seq)
		}
	}
}

// minPullForTest is core's minPull: the smallest pull with a delivery record.
const minPullForTest = 4

func keys(m map[int64]*core.Message) []int64 {
	var out []int64
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A session closed cleanly takes back the deliveries of the messages
// locked under it (CloseSession): their counts drop by one, below what
// their pull's delivery record says, and the record's entries for them
// are cancelled, so that a crash brings back the lowered counts while an
// abandoned message of the same pull keeps the record and its count. A
// session whose lock is not closed keeps them all.
func TestSessionCloseTakesBackPulledCountsAcrossCrash(t *testing.T) {
	fs, st, clk, b := openCrashable(t)
	ctx := t.Context()
	if _, err := b.CreateEntity(ctx, core.Entity{Kind: core.KindQueue, Name: "q", RequiresSession: true, LockDuration: time.Minute, MaxDeliveryCount: 10}); err != nil {
		t.Fatal(err)
	}
	for _, sid := range []string{"a", "b"} {
		for i := range 6 {
			m := coretest.Text(fmt.Sprint(sid, i))
			m.SessionID = sid
			if _, err := b.Send(ctx, "q", m); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := map[int64]int32{}
	pull := func(sid string, close bool) {
		t.Helper()
		sl, err := b.AcceptSession(ctx, "q", sid)
		if err != nil {
			t.Fatal(err)
		}
		got, err := b.Receive(coretest.Now(t), "q", core.ReceiveOptions{Mode: core.PeekLock, Max: 6, Session: sl})
		if err != nil || len(got) != 6 {
			t.Fatalf("session %s: received %d, %v", sid, len(got), err)
		}
		// The first completed, the second abandoned (it keeps its count,
		// and the pull's record with it); the rest locked until the
		// session closes (counts back to 0) or not (counts 1).
		if err := b.Settle(ctx, "q", got[0].LockToken, core.Outcome{Kind: core.Complete}); err != nil {
			t.Fatal(err)
		}
		if err := b.Settle(ctx, "q", got[1].LockToken, core.Outcome{Kind: core.Abandon}); err != nil {
			t.Fatal(err)
		}
		want[got[1].SequenceNumber] = 1
		for _, m := range got[2:] {
			want[m.SequenceNumber] = 1
			if close {
				want[m.SequenceNumber] = 0
			}
		}
		if close {
			if err := b.CloseSession("q", sl); err != nil {
				t.Fatal(err)
			}
		}
	}
	pull("a", true)
	pull("b", false)
	checkPeek(t, b, want, "before the crash")
	synced := coretest.Text("synced")
	synced.SessionID = "c"
	seqs, err := b.Send(ctx, "q", synced) // makes everything before it durable
	if err != nil {
		t.Fatal(err)
	}
	want[seqs[0]] = 0
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	b.Close()
	st.Close()

	_, b2 := recoverCrashed(t, crashed, clk)
	if err := b2.Check(); err != nil {
		t.Fatalf("consistency after the crash: %v", err)
	}
	checkPeek(t, b2, want, "after the crash")
}

// Pulls, settlements and lock expiries racing each other never let a
// delivery record go while a message still depends on it: once they
// stop, the counts the store gives (Peek: state records and delivery
// records) are the counts in memory (a delivery gives each one more),
// and once every message is gone no record is left.
func TestDeliveryRecordsKeepUpWithConcurrentSettlements(t *testing.T) {
	st, err := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	clk := clock.NewFake(coretest.Epoch)
	b, err := core.New(core.Config{Store: st, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := t.Context()
	if _, err := b.CreateEntity(ctx, core.Entity{Kind: core.KindQueue, Name: "q", LockDuration: time.Minute, MaxDeliveryCount: 1000}); err != nil {
		t.Fatal(err)
	}
	const n = 400
	for i := range n {
		if _, err := b.Send(ctx, "q", coretest.Text(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	var deferred sync.Map // sequence number → true
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for round := range 30 {
				got, err := b.Receive(coretest.Now(t), "q", core.ReceiveOptions{Mode: core.PeekLock, Max: 3 + (g+round)%8})
				if err != nil {
					t.Error(err)
					return
				}
				for i, m := range got {
					var o core.Outcome
					switch (g + round + i) % 6 {
					case 0:
						o.Kind = core.Complete
					case 1, 2:
						o.Kind = core.Abandon
					case 3:
						o.Kind = core.Release
					case 4:
						if m.SequenceNumber%7 == 0 {
							o.Kind = core.Defer
						} else {
							o.Kind = core.Abandon
						}
					default:
						continue // left locked until it expires
					}
					// Another receiver's clock advance may have ended the lock.
					err := b.Settle(ctx, "q", m.LockToken, o)
					switch {
					case err == nil && o.Kind == core.Defer:
						deferred.Store(m.SequenceNumber, true)
					case err != nil && !errors.Is(err, core.ErrLockLost):
						t.Errorf("settle %d: %v", m.SequenceNumber, err)
					}
				}
				if round%10 == 9 && g == 0 {
					clk.Advance(2 * time.Minute) // the locks left expire
				}
			}
		})
	}
	wg.Wait()
	clk.Advance(2 * time.Minute)
	if err := b.Check(); err != nil {
		t.Fatal(err)
	}
	stored := map[int64]int32{}
	msgs, err := b.Peek(ctx, "q", core.PeekOptions{Max: n})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		stored[m.SequenceNumber] = m.DeliveryCount
	}
	var seqs []int64
	deferred.Range(func(k, _ any) bool { seqs = append(seqs, k.(int64)); return true })
	def, err := b.ReceiveDeferred(ctx, "q", core.PeekLock, seqs)
	if err != nil {
		t.Fatal(err)
	}
	all, err := b.Receive(coretest.Now(t), "q", core.ReceiveOptions{Mode: core.PeekLock, Max: n})
	if err != nil {
		t.Fatal(err)
	}
	all = append(all, def...)
	if len(all) != len(stored) {
		t.Errorf("peek shows %d messages, receiving them all %d", len(stored), len(all))
	}
	for _, m := range all {
		if want := stored[m.SequenceNumber] + 1; m.DeliveryCount != want {
			t.Errorf("message %d delivered with count %d, the store says %d before", m.SequenceNumber, m.DeliveryCount, want-1)
		}
		if err := b.Settle(ctx, "q", m.LockToken, core.Outcome{Kind: core.Complete}); err != nil {
			t.Fatal(err)
		}
	}
	// A write of the core's (a receive-and-delete) carries the last
	// records' deletions.
	if _, err := b.Send(ctx, "q", coretest.Text("last")); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Receive(coretest.Now(t), "q", core.ReceiveOptions{Mode: core.ReceiveAndDelete, Max: 1}); err != nil || len(got) != 1 {
		t.Fatalf("receive-and-delete: %d, %v", len(got), err)
	}
	if n := countKeys(t, st, 'L'); n != 0 {
		t.Errorf("%d delivery records (or cancellations) left once the queue was drained", n)
	}
}

// A settlement that writes a message's state record with its count
// (defer, abandon with properties) ends its dependence on its pull's
// record: a pull whose messages are all deferred or abandoned with
// properties leaves no record behind, and peek gives their counts from
// their state records.
func TestDeferredMessagesLetTheirPullsRecordGo(t *testing.T) {
	st, err := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b, err := core.New(core.Config{Store: st, Clock: clock.NewFake(coretest.Epoch)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := t.Context()
	if _, err := b.CreateEntity(ctx, core.Entity{Kind: core.KindQueue, Name: "q"}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := b.Send(ctx, "q", coretest.Text(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	got, err := b.Receive(coretest.Now(t), "q", core.ReceiveOptions{Mode: core.PeekLock, Max: 4})
	if err != nil || len(got) != 4 {
		t.Fatalf("received %d, %v", len(got), err)
	}
	want := map[int64]int32{}
	for i, m := range got {
		o := core.Outcome{Kind: core.Defer}
		if i%2 == 1 {
			o = core.Outcome{Kind: core.Abandon, Properties: map[string]any{"seen": true}}
		}
		if err := b.Settle(ctx, "q", m.LockToken, o); err != nil {
			t.Fatal(err)
		}
		want[m.SequenceNumber] = 1
	}
	want[5] = 0
	// Any write of the core's carries the record's deletion: a
	// receive-and-delete on another queue.
	if _, err := b.CreateEntity(ctx, core.Entity{Kind: core.KindQueue, Name: "other"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Send(ctx, "other", coretest.Text("x")); err != nil {
		t.Fatal(err)
	}
	last, err := b.Receive(coretest.Now(t), "other", core.ReceiveOptions{Mode: core.ReceiveAndDelete, Max: 1})
	if err != nil || len(last) != 1 {
		t.Fatalf("receive-and-delete: %d, %v", len(last), err)
	}
	if n := countKeys(t, st, 'L'); n != 0 {
		t.Errorf("%d delivery records left with every message of the pull deferred or abandoned with properties", n)
	}
	checkPeek(t, b, want, "after the settlements")
}

package core_test

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/clock"
	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
)

// pebbleOpener returns an Opener for a pebblestore in a temp dir (or on
// fs when given), closing and reopening it on each restart.
func pebbleOpener(t testing.TB, fs vfs.FS) coretest.Opener {
	dir := t.TempDir()
	var cur storage.Store
	t.Cleanup(func() {
		if cur != nil {
			cur.Close()
		}
	})
	return func(t testing.TB, prev storage.Store) storage.Store {
		if prev != nil {
			if err := prev.Close(); err != nil {
				t.Fatalf("close pebble: %v", err)
			}
		}
		s, err := pebblestore.Open(dir, pebblestore.Options{FS: fs})
		if err != nil {
			t.Fatalf("open pebble: %v", err)
		}
		cur = s
		return s
	}
}

// forEachStore runs f once on memstore and once on pebblestore.
func forEachStore(t *testing.T, f func(t *testing.T, open coretest.Opener)) {
	t.Run("mem", func(t *testing.T) { f(t, coretest.MemOpener) })
	t.Run("pebble", func(t *testing.T) { f(t, pebbleOpener(t, nil)) })
}

// fullMessage sets every sender property and a property of every type.
func fullMessage() *core.Message {
	uid := core.UUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	return &core.Message{
		MessageID: "id-1", CorrelationID: uid, SessionID: "", ReplyToSessionID: "rs",
		To: "to", ReplyTo: "reply", Subject: "subj", ContentType: "text/plain", ContentEncoding: "gzip",
		PartitionKey: "pk", ViaPartitionKey: "vpk", TimeToLive: time.Hour,
		CreationTime: coretest.Epoch.Add(-time.Minute), UserID: []byte("user"), Priority: 4, Durable: true,
		ApplicationProperties: map[string]any{
			"i8": int8(-8), "i16": int16(-16), "i32": int32(-32), "i64": int64(-64),
			"u8": uint8(8), "u16": uint16(16), "u32": uint32(32), "u64": uint64(64),
			"f32": float32(1.5), "f64": 2.25, "b": true, "s": "str", "bin": []byte{0, 1},
			"t": coretest.Epoch.Add(time.Second), "uuid": uid, "sym": core.Symbol("sym"), "nil": nil,
			"list": []any{int32(1), "two"}, "map": map[string]any{"k": int64(1)},
		},
		Annotations: map[string]any{"x-custom": "kept"},
		BodyType:    core.BodyAMQP,
		Body:        []byte{0x00, 0x53, 0x77},
	}
}

func TestRecoveryKeepsEveryMessageState(t *testing.T) {
	forEachStore(t, func(t *testing.T, open coretest.Opener) {
		env := coretest.NewWith(t, open)
		env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q", LockDuration: 30 * time.Second, MaxDeliveryCount: 5})
		sent := fullMessage()
		env.MustSend(t, "q", sent) // seq 1: active
		sched := coretest.Text("scheduled")
		sched.ScheduledEnqueueTime = coretest.Epoch.Add(time.Hour)
		env.MustSend(t, "q", sched, coretest.Text("deferred"), coretest.Text("dead"), coretest.Text("locked")) // 2..5

		// Receive 1 and 3..5; then give 1 back, defer 3, dead-letter 4, hold 5.
		got := env.MustReceive(t, "q", core.PeekLock, 10)
		if len(got) != 4 {
			t.Fatalf("received %d, want 4", len(got))
		}
		env.MustSettle(t, "q", got[0].LockToken, core.Outcome{Kind: core.Release})
		env.MustSettle(t, "q", got[1].LockToken, core.Outcome{Kind: core.Defer})
		env.MustSettle(t, "q", got[2].LockToken, core.Outcome{Kind: core.DeadLetter, DeadLetterReason: "r"})

		env.Restart(t)
		c := env.MustCounts(t, "q")
		if want := (core.Counts{Active: 2, Scheduled: 1, Deferred: 1, DeadLetter: 1, Total: 5}); c.Active != want.Active || c.Scheduled != want.Scheduled || c.Deferred != want.Deferred || c.DeadLetter != want.DeadLetter || c.Total != want.Total {
			t.Errorf("counts after restart %+v, want %+v", c, want)
		}
		// The lock on 5 is gone: available again, its delivery counted.
		again := env.MustReceive(t, "q", core.PeekLock, 10)
		if len(again) != 2 || again[0].SequenceNumber != 1 || again[1].SequenceNumber != 5 {
			t.Fatalf("after restart received %v", seqsOf(again))
		}
		if again[0].DeliveryCount != 1 || again[1].DeliveryCount != 2 {
			t.Errorf("delivery counts %d, %d; want 1 (released) and 2 (locked at restart)", again[0].DeliveryCount, again[1].DeliveryCount)
		}
		want := fullMessage()
		ignore := cmpopts.IgnoreFields(core.Message{}, "SequenceNumber", "EnqueuedSequenceNumber", "EnqueuedTime",
			"ExpiresAt", "DeliveryCount", "State", "LockToken", "LockedUntil")
		if diff := cmp.Diff(want, again[0], ignore); diff != "" {
			t.Errorf("message after restart differs (-sent +got):\n%s", diff)
		}
		if !again[0].EnqueuedTime.Equal(coretest.Epoch) || !again[0].ExpiresAt.Equal(coretest.Epoch.Add(time.Hour)) || again[0].EnqueuedSequenceNumber != 1 {
			t.Errorf("broker properties after restart: enqueued %v expires %v eseq %d", again[0].EnqueuedTime, again[0].ExpiresAt, again[0].EnqueuedSequenceNumber)
		}
		d, err := env.Broker.ReceiveDeferred(t.Context(), "q", core.PeekLock, []int64{3})
		if err != nil || len(d) != 1 || string(d[0].Body) != "deferred" {
			t.Errorf("deferred after restart: %v %v", err, d)
		}
		dl := env.MustReceive(t, "q/$DeadLetterQueue", core.ReceiveAndDelete, 10)
		if len(dl) != 1 || dl[0].ApplicationProperties["DeadLetterReason"] != "r" {
			t.Errorf("dead letters after restart: %v", dl)
		}
		// At +1h: 2 activates, 1 (TTL 1h) has expired, 5's lock has ended.
		env.Clock.Advance(time.Hour)
		if s := env.MustReceive(t, "q", core.PeekLock, 10); !cmp.Equal(seqsOf(s), []int64{2, 5}) || string(s[0].Body) != "scheduled" {
			t.Errorf("after restart and an hour got %v, want [2 5] with 2 the scheduled one", seqsOf(s))
		}
	})
}

func seqsOf(msgs []*core.Message) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = m.SequenceNumber
	}
	return out
}

func TestSequenceNumbersNeverReused(t *testing.T) {
	forEachStore(t, func(t *testing.T, open coretest.Opener) {
		env := coretest.NewWith(t, open)
		env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
		env.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
		env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "s"})
		var last int64
		for round := range 4 {
			for _, path := range []string{"q", "t"} {
				seqs := env.MustSend(t, path, coretest.Text("a"), coretest.Text("b"))
				if seqs[0] <= last && path == "q" {
					t.Fatalf("round %d: %s got seq %d after %d", round, path, seqs[0], last)
				}
				if path == "q" {
					last = seqs[1]
				}
				// Empty the entity so nothing stored remembers the numbers.
				from := path
				if path == "t" {
					from = "t/Subscriptions/s"
				}
				if got := env.MustReceive(t, from, core.ReceiveAndDelete, 10); len(got) != 2 {
					t.Fatalf("drain %s: %d", from, len(got))
				}
			}
			env.Restart(t)
		}
		ts := env.MustSend(t, "t", coretest.Text("x"))
		if ts[0] <= 2 {
			t.Errorf("topic seq %d reused after restarts", ts[0])
		}
	})
}

// With a crashable file system, everything Send acknowledged before the
// crash survives it, even with sends in flight at the moment of the crash,
// and so does every synced removal (receive-and-delete, complete).
func TestCrashKeepsAcknowledgedWork(t *testing.T) {
	fs, st, clk, b := openCrashable(t)
	ctx := t.Context()
	if _, err := b.CreateEntity(ctx, core.Entity{Kind: core.KindQueue, Name: "q"}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	acked := map[string]int64{}
	send := func(body string) {
		seqs, err := b.Send(ctx, "q", coretest.Text(body))
		if err != nil {
			t.Errorf("send: %v", err)
			return
		}
		mu.Lock()
		acked[body] = seqs[0]
		mu.Unlock()
	}
	for i := range 100 {
		send(fmt.Sprintf("pre-%03d", i))
	}
	// Remove some durably, both ways.
	removed := map[string]bool{}
	rd, err := b.Receive(coretest.Now(t), "q", core.ReceiveOptions{Mode: core.ReceiveAndDelete, Max: 10})
	if err != nil || len(rd) != 10 {
		t.Fatalf("receive-and-delete: %v %d", err, len(rd))
	}
	pl, err := b.Receive(coretest.Now(t), "q", core.ReceiveOptions{Max: 10})
	if err != nil || len(pl) != 10 {
		t.Fatalf("peek-lock: %v %d", err, len(pl))
	}
	for _, m := range append(rd, pl...) {
		removed[string(m.Body)] = true
	}
	for _, m := range pl {
		if err := b.Settle(ctx, "q", m.LockToken, core.Outcome{Kind: core.Complete}); err != nil {
			t.Fatal(err)
		}
	}
	// Crash while 4 senders are busy.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				send(fmt.Sprintf("g%d-%04d", g, i))
			}
		})
	}
	for {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 200 {
			break
		}
		runtime.Gosched()
	}
	mu.Lock()
	mustHave := make(map[string]int64, len(acked))
	for k, v := range acked {
		mustHave[k] = v
	}
	mu.Unlock()
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	close(stop)
	wg.Wait()
	b.Close()
	st.Close()

	_, b2 := recoverCrashed(t, crashed, clk)
	msgs, err := b2.Peek(ctx, "q", core.PeekOptions{Max: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	present := map[string]bool{}
	var maxSeq int64
	for _, m := range msgs {
		present[string(m.Body)] = true
		maxSeq = max(maxSeq, m.SequenceNumber)
	}
	for body := range mustHave {
		if removed[body] && present[body] {
			t.Errorf("%s was removed durably but came back after the crash", body)
		}
		if !removed[body] && !present[body] {
			t.Errorf("%s was acknowledged but lost in the crash", body)
		}
	}
	seqs, err := b2.Send(ctx, "q", coretest.Text("after"))
	if err != nil {
		t.Fatal(err)
	}
	for body, seq := range mustHave {
		if seqs[0] <= seq {
			t.Fatalf("sequence number %d reused after the crash (%s had %d)", seqs[0], body, seq)
		}
	}
}

// openCrashable opens a broker on a Pebble store in a crashable memory
// file system (vfs.MemFS.CrashClone takes its crash images), on a fake
// clock at coretest.Epoch.
func openCrashable(t *testing.T) (*vfs.MemFS, *pebblestore.Store, *clock.Fake, *core.Broker) {
	t.Helper()
	fs := vfs.NewCrashableMem()
	st, err := pebblestore.Open("db", pebblestore.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(coretest.Epoch)
	b, err := core.New(core.Config{Store: st, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return fs, st, clk, b
}

// recoverCrashed opens the store "db" on crashed (a CrashClone of the file
// system a broker ran on) and recovers a broker from it, both closed when
// the test ends.
func recoverCrashed(t *testing.T, crashed vfs.FS, clk clock.Clock) (*pebblestore.Store, *core.Broker) {
	t.Helper()
	st, err := pebblestore.Open("db", pebblestore.Options{FS: crashed})
	if err != nil {
		t.Fatalf("reopen after the crash: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	b, err := core.New(core.Config{Store: st, Clock: clk})
	if err != nil {
		t.Fatalf("recover after the crash: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return st, b
}

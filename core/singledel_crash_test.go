package core_test

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/clock"
	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
)

// A message's body is deleted with DeleteOnce (a Pebble SingleDelete),
// which must cancel the one Set it meets wherever that Set is: flushed to
// an sstable before the deletion, rewritten (dead-lettered, or modified by
// an abandon) across flushes, and across a crash and a restart. Nothing
// settled may come back and no body may be left behind (Broker.Check
// reports a body without its message), after recovery and after the
// flushes that follow it.
func TestSettledMessagesStayGoneAcrossFlushesAndCrash(t *testing.T) {
	fs := vfs.NewCrashableMem()
	st, err := pebblestore.Open("db", pebblestore.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	flush := func(st *pebblestore.Store) {
		t.Helper()
		done, err := st.StartFlush()
		if err != nil {
			t.Fatal(err)
		}
		<-done
	}
	clk := clock.NewFake(coretest.Epoch)
	b, err := core.New(core.Config{Store: st, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := b.CreateEntity(ctx, core.Entity{Kind: core.KindQueue, Name: "q"}); err != nil {
		t.Fatal(err)
	}
	const n = 40
	for i := range n {
		if _, err := b.Send(ctx, "q", coretest.Text(fmt.Sprintf("m%02d", i))); err != nil {
			t.Fatal(err)
		}
	}
	flush(st) // the bodies' Sets in sstables (and blob files)

	got, err := b.Receive(coretest.Now(t), "q", core.ReceiveOptions{Mode: core.PeekLock, Max: n})
	if err != nil || len(got) != n {
		t.Fatalf("receive: %d, %v", len(got), err)
	}
	// m00–m09 dead-lettered, m10–m19 abandoned with new properties: both
	// rewrite the body. m20–m29 completed as they are; m30–m39 kept.
	for i, m := range got {
		var o core.Outcome
		switch {
		case i < 10:
			o = core.Outcome{Kind: core.DeadLetter, DeadLetterReason: "test"}
		case i < 20:
			o = core.Outcome{Kind: core.Abandon, Properties: map[string]any{"rewritten": int64(i)}}
		case i < 30:
			o = core.Outcome{Kind: core.Complete}
		default:
			o = core.Outcome{Kind: core.Abandon}
		}
		if err := b.Settle(ctx, "q", m.LockToken, o); err != nil {
			t.Fatalf("settle %s: %v", m.Body, err)
		}
	}
	flush(st) // the rewritten bodies in sstables above the first ones

	// Complete the rewritten ones: the dead-lettered from the subqueue,
	// the abandoned from the queue.
	dlq, err := b.Receive(coretest.Now(t), "q/$DeadLetterQueue", core.ReceiveOptions{Mode: core.PeekLock, Max: n})
	if err != nil || len(dlq) != 10 {
		t.Fatalf("receive from the dead-letter subqueue: %d, %v", len(dlq), err)
	}
	for _, m := range dlq {
		if err := b.Settle(ctx, "q/$DeadLetterQueue", m.LockToken, core.Outcome{Kind: core.Complete}); err != nil {
			t.Fatal(err)
		}
	}
	again, err := b.Receive(coretest.Now(t), "q", core.ReceiveOptions{Mode: core.PeekLock, Max: n})
	if err != nil || len(again) != 20 {
		t.Fatalf("receive again: %d, %v", len(again), err)
	}
	for _, m := range again {
		if _, ok := m.ApplicationProperties["rewritten"]; ok {
			if err := b.Settle(ctx, "q", m.LockToken, core.Outcome{Kind: core.Complete}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := b.Check(); err != nil {
		t.Fatalf("before the crash: %v", err)
	}

	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	b.Close()
	st.Close()
	st2, b2 := recoverCrashed(t, crashed, clk)
	check := func(when string) {
		t.Helper()
		if err := b2.Check(); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		for _, path := range []string{"q", "q/$DeadLetterQueue"} {
			msgs, err := b2.Peek(ctx, path, core.PeekOptions{Max: n})
			if err != nil {
				t.Fatal(err)
			}
			var bodies []string
			for _, m := range msgs {
				bodies = append(bodies, string(m.Body))
			}
			want := 0
			if path == "q" {
				want = 10
			}
			if len(msgs) != want {
				t.Fatalf("%s: %s holds %d messages %q, want %d (m30–m39)", when, path, len(msgs), bodies, want)
			}
			for _, body := range bodies {
				if body < "m30" {
					t.Fatalf("%s: settled message %s came back in %s", when, body, path)
				}
			}
		}
	}
	check("after the crash")
	flush(st2) // the replayed deletions meet the Sets flushed before
	check("after a flush")
}

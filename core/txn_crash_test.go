package core_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// A crash in the middle of committing transactions leaves each of them
// whole or absent: for every input message, after the crash either the
// input is still there and its output is not, or the other way round —
// never both, never neither. Every transaction whose commit returned is
// there; a transaction never committed left nothing. Crash images keep a
// random share of the data not yet synced, so a commit's write can be
// torn on disk.
func TestTxnCrashAllOrNothing(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { txnCrash(t, seed) })
	}
}

func txnCrash(t *testing.T, seed uint64) {
	const inputs = 400
	fs, st, clk, b := openCrashable(t)
	ctx := t.Context()
	for _, name := range []string{"in", "out"} {
		if _, err := b.CreateEntity(ctx, core.Entity{Kind: core.KindQueue, Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range inputs {
		if _, err := b.Send(ctx, "in", coretest.Text(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	// A transaction that is never committed.
	open := b.BeginTxn()
	if err := open.Send("out", "in", []*core.Message{coretest.Text("never committed")}); err != nil {
		t.Fatal(err)
	}

	var committed sync.Map // body of input → true once its commit returned
	var done atomic.Int32
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				msgs, err := b.Receive(coretest.Now(t), "in", core.ReceiveOptions{Max: 1})
				if err != nil || len(msgs) == 0 {
					return
				}
				m := msgs[0]
				tx := b.BeginTxn()
				if err := tx.Settle("in", m.LockToken, core.Outcome{Kind: core.Complete}); err != nil {
					t.Errorf("settle: %v", err)
					return
				}
				if err := tx.Send("out", "in", []*core.Message{coretest.Text("out-" + string(m.Body))}); err != nil {
					t.Errorf("send: %v", err)
					return
				}
				if err := tx.Commit(); err != nil {
					return // the broker is closing under us
				}
				committed.Store(string(m.Body), true)
				done.Add(1)
			}
		})
	}
	for done.Load() < inputs/4 {
		runtime.Gosched()
	}
	mustHave := map[string]bool{}
	committed.Range(func(k, _ any) bool { mustHave[k.(string)] = true; return true })
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rand.New(rand.NewPCG(seed, seed))})
	close(stop)
	wg.Wait()
	b.Close()
	st.Close()

	_, b2 := recoverCrashed(t, crashed, clk)
	if err := b2.Check(); err != nil {
		t.Fatalf("consistency after crash: %v", err)
	}
	bodies := func(path string) map[string]bool {
		msgs, err := b2.Peek(ctx, path, core.PeekOptions{Max: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, m := range msgs {
			if out[string(m.Body)] {
				t.Errorf("%s: %s is there twice", path, m.Body)
			}
			out[string(m.Body)] = true
		}
		return out
	}
	in, out := bodies("in"), bodies("out")
	if out["never committed"] {
		t.Error("a transaction that never committed left its message")
	}
	for i := range inputs {
		body := fmt.Sprint(i)
		switch hasIn, hasOut := in[body], out["out-"+body]; {
		case hasIn && hasOut:
			t.Errorf("input %s and its output are both there: half a transaction", body)
		case !hasIn && !hasOut:
			t.Errorf("input %s and its output are both gone: half a transaction", body)
		case mustHave[body] && !hasOut:
			t.Errorf("the transaction of input %s committed before the crash but is lost", body)
		}
	}
}

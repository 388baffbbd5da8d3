package raftstore

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/memstore"
)

// TestCoalescedBatchLeavesTheSameState applies random batches, which keep
// DeleteOnce's and SetNew's contracts, as they are and coalesced, each over the same
// earlier state, to the reference store (which refuses a batch that
// breaks the contract): the two must hold the same keys and values.
func TestCoalescedBatchLeavesTheSameState(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	totalDropped := 0
	for round := range 500 {
		before := randomBatch(rng, nil)
		plain, merged := memstore.New(), memstore.New()
		for _, s := range []*memstore.Store{plain, merged} {
			if err := s.Apply(&storage.Batch{Ops: slices.Clone(before.ops)}); err != nil {
				t.Fatalf("round %d: the earlier state: %v", round, err)
			}
		}
		b := randomBatch(rng, before.setsSince)
		want := slices.Clone(b.ops)
		got := coalesceAll(slices.Clone(b.ops))
		totalDropped += len(want) - len(got)
		if err := plain.Apply(&storage.Batch{Ops: want}); err != nil {
			t.Fatalf("round %d: the batch breaks DeleteOnce's contract (the generator's fault): %v", round, err)
		}
		if err := merged.Apply(&storage.Batch{Ops: got}); err != nil {
			t.Fatalf("round %d: the coalesced batch: %v", round, err)
		}
		if a, b := dump(t, plain), dump(t, merged); a != b {
			t.Fatalf("round %d: batch %s\ncoalesced %s\nleaves\n%s\ninstead of\n%s", round, opsString(want), opsString(got), b, a)
		}
	}
	if totalDropped == 0 {
		t.Fatal("no operation was ever dropped: the test exercises nothing")
	}
}

// TestCoalesceDropsAShortLivedMessage: a message sent, delivered and
// completed within one hold leaves a follower nothing to apply when its
// state record was created with SetNew (as core's sends do), and one
// deletion of the state record when it was not (a record that may have
// held a value before the batch).
func TestCoalesceDropsAShortLivedMessage(t *testing.T) {
	for _, c := range []struct {
		name string
		new  bool
		want string
	}{
		{"state record created with SetNew", true, ""},
		{"state record set with Set", false, "delete s/1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b storage.Batch
			if c.new {
				b.SetNew([]byte("s/1"), []byte("state, delivery count 0"))
			} else {
				b.Set([]byte("s/1"), []byte("state, delivery count 0"))
			}
			b.Set([]byte("b/1"), []byte("body"))
			b.Set([]byte("s/1"), []byte("state, delivery count 1"))
			b.Delete([]byte("s/1"))
			b.DeleteOnce([]byte("b/1"))
			got := coalesceAll(b.Ops)
			if opsString(got) != c.want {
				t.Fatalf("coalesced into %q, want %q", opsString(got), c.want)
			}
		})
	}
}

// TestCoalesceKeepsTheMarkOfTheFirstSet: a Set that replaces a SetNew
// in the batch takes its mark (the key held nothing before either), and
// one that replaces a plain Set does not, whatever its own mark says.
func TestCoalesceKeepsTheMarkOfTheFirstSet(t *testing.T) {
	var b storage.Batch
	b.SetNew([]byte("a"), []byte("1"))
	b.Set([]byte("a"), []byte("2"))
	b.Set([]byte("b"), []byte("1"))
	b.SetNew([]byte("b"), []byte("2")) // the caller's contract broken: not trusted
	got := coalesceAll(b.Ops)
	if want := "setnew a=2, set b=2"; opsString(got) != want {
		t.Fatalf("coalesced into %q, want %q", opsString(got), want)
	}
}

// TestCoalesceStopsAtDeletePrefix: a Set before a DeletePrefix is not
// matched with a Set after it; the three stay, in order.
func TestCoalesceStopsAtDeletePrefix(t *testing.T) {
	var b storage.Batch
	b.Set([]byte("q/1"), []byte("v"))
	b.DeletePrefix([]byte("q/"))
	b.Set([]byte("q/1"), []byte("w"))
	got := coalesceAll(b.Ops)
	if want := "set q/1=v, deleteprefix q/, set q/1=w"; opsString(got) != want {
		t.Fatalf("coalesced into %s, want %s", opsString(got), want)
	}
}

// checkTakenZeroed fails unless h keeps no block it has taken whole and
// no reference to an operation it has taken.
func checkTakenZeroed(t *testing.T, round int, h *heldOps) {
	t.Helper()
	if len(h.blocks) == 0 {
		return
	}
	if h.first >= h.size {
		t.Fatalf("round %d: the first block is taken whole (first %d of %d) and still kept", round, h.first, h.size)
	}
	for _, op := range h.blocks[0][:h.first] {
		if op.Key != nil || op.Value != nil {
			t.Fatalf("round %d: an operation taken is still referenced: %s", round, opsString([]storage.Op{op}))
		}
	}
}

// coalesceAll holds ops and takes them all at once: the batch a follower
// applies of one hold.
func coalesceAll(ops []storage.Op) []storage.Op {
	h := newHeldOps()
	for _, op := range ops {
		h.add(op)
	}
	return h.take(h.end(), nil)
}

// TestHeldOpsTakenInPrefixesLeaveTheSameState holds a long random run of
// operations (keeping DeleteOnce's and SetNew's contracts) as a follower
// does, taking a prefix of what it holds now and then, the younger ops
// staying held, and applies what each take returns to the reference
// store: once all is taken it must hold what the run applied as it is
// holds. So must the state after any one take with the rest of the run
// applied to it as it is, uncoalesced, as a node that stops there
// replays its log.
func TestHeldOpsTakenInPrefixesLeaveTheSameState(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	dropped := 0
	for round := range 200 {
		var run []storage.Op
		var sets map[string]int
		for range 1 + rng.IntN(8) {
			g := randomBatch(rng, sets)
			run, sets = append(run, g.ops...), g.setsSince
		}
		plain := memstore.New()
		if err := plain.Apply(&storage.Batch{Ops: slices.Clone(run)}); err != nil {
			t.Fatalf("round %d: the run breaks a contract (the generator's fault): %v", round, err)
		}
		// Small blocks, so that takes cross them and free them.
		held, h := memstore.New(), newHeldOpsBlocks(1+rng.IntN(5))
		var ends []int // the position after each op, as held
		replayFrom, replayState := -1, ""
		for i, op := range run {
			dropped += h.add(op)
			ends = append(ends, h.end())
			if rng.IntN(4) > 0 {
				continue
			}
			// Take the ops held up to a random earlier arrival.
			upTo := i - rng.IntN(i+1)
			if ends[upTo] <= h.base {
				continue
			}
			got := h.take(ends[upTo], nil)
			checkTakenZeroed(t, round, &h)
			if err := held.Apply(&storage.Batch{Ops: got}); err != nil {
				t.Fatalf("round %d: a taken prefix: %v", round, err)
			}
			if replayFrom < 0 && rng.IntN(3) == 0 {
				replayFrom, replayState = upTo+1, dump(t, held)
				replay := memstore.New()
				if err := replay.Apply(&storage.Batch{Ops: stateOps(t, held)}); err != nil {
					t.Fatal(err)
				}
				if err := replay.Apply(&storage.Batch{Ops: slices.Clone(run[replayFrom:])}); err != nil {
					t.Fatalf("round %d: replaying the run from %d over the state taken so far:\n%s: %v", round, replayFrom, replayState, err)
				}
				if a, b := dump(t, plain), dump(t, replay); a != b {
					t.Fatalf("round %d: the state after a take, the run replayed from %d over it, leaves\n%s\ninstead of\n%s", round, replayFrom, b, a)
				}
			}
		}
		if err := held.Apply(&storage.Batch{Ops: h.take(h.end(), nil)}); err != nil {
			t.Fatalf("round %d: the last take: %v", round, err)
		}
		if h.lastSet.len() != 0 || h.n != 0 || len(h.blocks) != 0 {
			t.Fatalf("round %d: %d ops in %d blocks and %d sets still held after everything was taken", round, h.n, len(h.blocks), h.lastSet.len())
		}
		if a, b := dump(t, plain), dump(t, held); a != b {
			t.Fatalf("round %d: run %s\ntaken in prefixes leaves\n%s\ninstead of\n%s", round, opsString(run), b, a)
		}
	}
	if dropped == 0 {
		t.Fatal("no operation was ever dropped: the test exercises nothing")
	}
}

// TestHeldOpsMatchAcrossATake: a message's send taken (applied) while
// its completion is still to come is not matched with it; one whose
// completion came before the take is dropped whole, though the
// completion stays held.
func TestHeldOpsMatchAcrossATake(t *testing.T) {
	h := newHeldOps()
	h.add(storage.Op{Kind: storage.OpSet, New: true, Key: []byte("s/1"), Value: []byte("sent")})
	h.add(storage.Op{Kind: storage.OpSet, Key: []byte("b/1"), Value: []byte("body")})
	firstSent := h.end()
	h.add(storage.Op{Kind: storage.OpSet, New: true, Key: []byte("s/2"), Value: []byte("sent")})
	if got := opsString(h.take(firstSent, nil)); got != "setnew s/1=sent, set b/1=body" {
		t.Fatalf("first take: %s", got)
	}
	h.add(storage.Op{Kind: storage.OpDelete, Key: []byte("s/1")})
	h.add(storage.Op{Kind: storage.OpDeleteOnce, Key: []byte("b/1")})
	h.add(storage.Op{Kind: storage.OpDelete, Key: []byte("s/2")})
	if got := opsString(h.take(h.end(), nil)); got != "delete s/1, deleteonce b/1" {
		t.Fatalf("second take: %s, want the deletions of the message applied before and nothing of the other", got)
	}
}

// stateOps is the operations that rebuild s's keys and values.
func stateOps(t *testing.T, s storage.Store) []storage.Op {
	t.Helper()
	var ops []storage.Op
	if err := s.Scan(nil, nil, func(k, v []byte) (bool, error) {
		ops = append(ops, storage.Op{Kind: storage.OpSet, Key: slices.Clone(k), Value: slices.Clone(v)})
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	return ops
}

type genBatch struct {
	ops       []storage.Op
	setsSince map[string]int // per key: sets since its last deletion, after the batch
}

// randomBatch makes up to 40 operations on 8 keys under two prefixes that
// keep DeleteOnce's and SetNew's contracts, given how many sets each key
// has had since its last deletion (nil: none; a key holds a value when
// it has had any).
func randomBatch(rng *rand.Rand, prior map[string]int) genBatch {
	g := genBatch{setsSince: map[string]int{}}
	for k, n := range prior {
		g.setsSince[k] = n
	}
	for range rng.IntN(40) {
		k := fmt.Sprintf("%c/%d", 'a'+rng.IntN(2), rng.IntN(4))
		switch r := rng.IntN(10); {
		case r < 5:
			// SetNew where the key holds nothing, half the time.
			isNew := g.setsSince[k] == 0 && rng.IntN(2) == 0
			g.ops = append(g.ops, storage.Op{Kind: storage.OpSet, New: isNew, Key: []byte(k), Value: fmt.Appendf(nil, "v%d", rng.IntN(1000))})
			g.setsSince[k]++
		case r < 7:
			g.ops = append(g.ops, storage.Op{Kind: storage.OpDelete, Key: []byte(k)})
			g.setsSince[k] = 0
		case r < 9:
			if g.setsSince[k] > 1 {
				continue
			}
			g.ops = append(g.ops, storage.Op{Kind: storage.OpDeleteOnce, Key: []byte(k)})
			g.setsSince[k] = 0
		default:
			p := k[:2]
			g.ops = append(g.ops, storage.Op{Kind: storage.OpDeletePrefix, Key: []byte(p)})
			for key := range g.setsSince {
				if len(key) >= len(p) && key[:len(p)] == p {
					g.setsSince[key] = 0
				}
			}
		}
	}
	return g
}

func dump(t *testing.T, s storage.Store) string {
	t.Helper()
	out := ""
	if err := s.Scan(nil, nil, func(k, v []byte) (bool, error) {
		out += string(k) + "=" + string(v) + "\n"
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func opsString(ops []storage.Op) string {
	out := ""
	for i, op := range ops {
		if i > 0 {
			out += ", "
		}
		switch op.Kind {
		case storage.OpSet:
			if op.New {
				out += "setnew "
			} else {
				out += "set "
			}
			out += string(op.Key) + "=" + string(op.Value)
		case storage.OpDelete:
			out += "delete " + string(op.Key)
		case storage.OpDeleteOnce:
			out += "deleteonce " + string(op.Key)
		case storage.OpDeletePrefix:
			out += "deleteprefix " + string(op.Key)
		default:
			out += fmt.Sprintf("op%d %s", op.Kind, op.Key)
		}
	}
	return out
}

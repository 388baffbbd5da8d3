package raftstore

import (
	"fmt"
	"hash/maphash"
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
	seed := maphash.MakeSeed()
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
		got := coalesceOps(slices.Clone(b.ops), seed)
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
			got := coalesceOps(b.Ops, maphash.MakeSeed())
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
	got := coalesceOps(b.Ops, maphash.MakeSeed())
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
	got := coalesceOps(b.Ops, maphash.MakeSeed())
	if want := "set q/1=v, deleteprefix q/, set q/1=w"; opsString(got) != want {
		t.Fatalf("coalesced into %s, want %s", opsString(got), want)
	}
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

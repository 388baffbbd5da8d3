package memstore_test

import (
	"errors"
	"testing"

	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/memstore"
)

// The reference store refuses a DeleteOnce that breaks its invariant (a
// key set twice with no deletion between), applying nothing of the
// batch, so that the core's tests, which run on it, catch a caller that
// would make Pebble show an older value again. A rewrite that deletes
// the key before setting it again keeps the invariant.
func TestDeleteOnceOfKeySetTwiceRefused(t *testing.T) {
	s := memstore.New()
	defer s.Close()
	apply := func(ops ...storage.Op) error { return s.Apply(&storage.Batch{Ops: ops}) }
	set := func(k, v string) storage.Op {
		return storage.Op{Kind: storage.OpSet, Key: []byte(k), Value: []byte(v)}
	}
	del := func(kind storage.OpKind, k string) storage.Op { return storage.Op{Kind: kind, Key: []byte(k)} }

	if err := apply(set("twice", "1"), set("once", "1"), set("rewritten", "1"), set("rewritten-once", "1")); err != nil {
		t.Fatal(err)
	}
	if err := apply(set("twice", "2"), del(storage.OpDelete, "rewritten"), set("rewritten", "2"),
		del(storage.OpDeleteOnce, "rewritten-once"), set("rewritten-once", "2")); err != nil {
		t.Fatal(err)
	}
	err := apply(del(storage.OpDeleteOnce, "once"), del(storage.OpDeleteOnce, "twice"))
	if !errors.Is(err, memstore.ErrDeleteOnceMisuse) {
		t.Fatalf("DeleteOnce of a key set twice: %v, want ErrDeleteOnceMisuse", err)
	}
	if _, err := s.Get([]byte("once")); err != nil {
		t.Fatalf("the refused batch was applied in part: Get(once) = %v", err)
	}
	if err := apply(del(storage.OpDeleteOnce, "once"), del(storage.OpDeleteOnce, "rewritten"),
		del(storage.OpDeleteOnce, "rewritten-once")); err != nil {
		t.Fatalf("DeleteOnce of keys set once since their last deletion: %v", err)
	}
	// A key deleted (any way) may be set once and deleted once again.
	if err := apply(del(storage.OpDelete, "twice"), set("twice", "3")); err != nil {
		t.Fatal(err)
	}
	if err := apply(del(storage.OpDeleteOnce, "twice")); err != nil {
		t.Fatalf("DeleteOnce after Delete and one Set: %v", err)
	}
}

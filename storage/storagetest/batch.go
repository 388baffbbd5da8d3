package storagetest

import (
	"testing"

	"github.com/omnibusmq/omnibus/storage"
)

var batchTests = []test{
	{"Empty", testBatchEmpty},
	{"Nil", testBatchNil},
	{"OrderWithin", testBatchOrder},
	{"UnknownKindRejectedWhole", testBatchUnknownKind},
	{"Reuse", testBatchReuse},
}

func testBatchEmpty(t *testing.T, s storage.Store) {
	mustSet(t, s, kv{"k", "v"})
	mustApply(t, s, &storage.Batch{})
	mustApply(t, s, &storage.Batch{Sync: true})
	mustApply(t, s, &storage.Batch{Ops: []storage.Op{}, Sync: true})
	checkContents(t, s, kv{"k", "v"})
}

func testBatchNil(t *testing.T, s storage.Store) {
	mustSet(t, s, kv{"k", "v"})
	// No input may panic a store; a nil batch holds no operations.
	if err := s.Apply(nil); err != nil {
		t.Fatalf("Apply(nil) = %v, want nil", err)
	}
	checkContents(t, s, kv{"k", "v"})
}

func testBatchOrder(t *testing.T, s storage.Store) {
	mustSet(t, s, kv{"gone", "0"})
	b := &storage.Batch{Sync: true}
	b.Set([]byte("twice"), []byte("first"))
	b.Set([]byte("twice"), []byte("second"))
	b.Set([]byte("set-then-deleted"), []byte("x"))
	b.Delete([]byte("set-then-deleted"))
	b.Delete([]byte("deleted-then-set"))
	b.Set([]byte("deleted-then-set"), []byte("y"))
	b.Delete([]byte("gone"))
	mustApply(t, s, b)
	checkContents(t, s, kv{"deleted-then-set", "y"}, kv{"twice", "second"})
}

func testBatchUnknownKind(t *testing.T, s storage.Store) {
	mustSet(t, s, kv{"a", "1"})
	b := &storage.Batch{Sync: true}
	b.Set([]byte("b"), []byte("2"))
	b.Delete([]byte("a"))
	b.Ops = append(b.Ops, storage.Op{Kind: 0, Key: []byte("c")}, storage.Op{Kind: 99, Key: []byte("d")})
	if err := s.Apply(b); err == nil {
		t.Fatal("Apply of a batch with an unknown op kind succeeded")
	}
	// All or nothing: the valid operations before the bad one did not
	// apply either.
	checkContents(t, s, kv{"a", "1"})
}

func testBatchReuse(t *testing.T, s storage.Store) {
	var b storage.Batch
	key := make([]byte, 1)
	for i := range 5 {
		b.Reset()
		b.Sync = true
		key[0] = 'a' + byte(i)
		b.Set(key, key)
		mustApply(t, s, &b)
	}
	checkContents(t, s, kv{"a", "a"}, kv{"b", "b"}, kv{"c", "c"}, kv{"d", "d"}, kv{"e", "e"})
}

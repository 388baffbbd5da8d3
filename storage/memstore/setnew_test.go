package memstore_test

import (
	"errors"
	"testing"

	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/memstore"
)

// The reference store refuses a SetNew of a key that holds a value,
// applying nothing of the batch, so that the core's tests catch a caller
// whose mark would let a follower's merged writes (storage/raftstore)
// drop a deletion and keep the older value. A key never set, or deleted
// earlier in the same batch, may be set with SetNew.
func TestSetNewOfAPresentKeyRefused(t *testing.T) {
	s := memstore.New()
	defer s.Close()
	apply := func(ops ...storage.Op) error { return s.Apply(&storage.Batch{Ops: ops}) }
	setNew := func(k, v string) storage.Op {
		return storage.Op{Kind: storage.OpSet, New: true, Key: []byte(k), Value: []byte(v)}
	}
	set := func(k, v string) storage.Op {
		return storage.Op{Kind: storage.OpSet, Key: []byte(k), Value: []byte(v)}
	}
	del := func(k string) storage.Op { return storage.Op{Kind: storage.OpDelete, Key: []byte(k)} }

	if err := apply(setNew("fresh", "1"), set("old", "1")); err != nil {
		t.Fatalf("SetNew of a key never set: %v", err)
	}
	err := apply(setNew("other", "1"), setNew("old", "2"))
	if !errors.Is(err, memstore.ErrSetNewMisuse) {
		t.Fatalf("SetNew of a key that holds a value: %v, want ErrSetNewMisuse", err)
	}
	if _, err := s.Get([]byte("other")); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("the refused batch was applied in part: Get(other) = %v", err)
	}
	if v, err := s.Get([]byte("old")); err != nil || string(v) != "1" {
		t.Fatalf("Get(old) = %q, %v after the refused batch, want 1", v, err)
	}
	if err := apply(del("old"), setNew("old", "3")); err != nil {
		t.Fatalf("SetNew after a deletion in the same batch: %v", err)
	}
	if err := apply(set("fresh", "2")); err != nil {
		t.Fatal(err)
	}
	if err := apply(setNew("fresh", "3")); !errors.Is(err, memstore.ErrSetNewMisuse) {
		t.Fatalf("SetNew of a key set with SetNew, then Set: %v, want ErrSetNewMisuse", err)
	}
}

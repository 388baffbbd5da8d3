package pebblestore

import (
	"bytes"
	"testing"

	"github.com/omnibusmq/omnibus/storage"
)

// batchSize bounds the Pebble batch Apply builds, so that the batch is
// allocated once at its full size instead of doubling (and copying) its
// way there: for sets of every size from empty to 64 KiB, deletes and
// prefix deletes, the built batch is no larger than batchSize says and
// not much smaller.
func TestBatchSizeBoundsThePebbleBatch(t *testing.T) {
	s, err := Open("db", Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var b storage.Batch
	for i, n := range []int{0, 1, 127, 128, 1024, 16383, 16384, 65536, 1 << 20} {
		b.Set(bytes.Repeat([]byte{byte('a' + i)}, 1+i*40), make([]byte, n))
	}
	b.Delete([]byte("gone"))
	b.DeletePrefix([]byte("q/17/"))
	pb := s.db.NewBatch()
	defer pb.Close()
	for _, op := range b.Ops {
		switch op.Kind {
		case storage.OpSet:
			err = pb.Set(op.Key, op.Value, nil)
		case storage.OpDelete:
			err = pb.Delete(op.Key, nil)
		case storage.OpDeletePrefix:
			end, _ := prefixEnd(op.Key)
			err = pb.DeleteRange(op.Key, end, nil)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	got, bound := len(pb.Repr()), batchSize(&b)
	if got > bound || bound > got+len(b.Ops)*batchRecordOverhead {
		t.Errorf("a %d-byte Pebble batch, batchSize says %d", got, bound)
	}
	if err := s.Apply(&b); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Get(b.Ops[7].Key); err != nil || len(v) != 65536 {
		t.Fatalf("Get after Apply: %d bytes, %v", len(v), err)
	}
}

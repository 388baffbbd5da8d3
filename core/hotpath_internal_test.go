package core

import (
	"bytes"
	"sync"
	"testing"

	"github.com/omnibusmq/omnibus/storage"
)

// Lock tokens and generated message ids are version 4 UUIDs, distinct
// across concurrent callers, and cost no allocation.
func TestNewUUIDIsRandomV4(t *testing.T) {
	const goroutines, each = 8, 2000
	var mu sync.Mutex
	seen := make(map[UUID]bool, goroutines*each)
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			got := make([]UUID, each)
			for i := range got {
				got[i] = NewUUID()
			}
			mu.Lock()
			defer mu.Unlock()
			for _, u := range got {
				if seen[u] {
					t.Errorf("NewUUID returned %s twice", u)
				}
				seen[u] = true
				if u[6]>>4 != 4 || u[8]>>6 != 2 {
					t.Errorf("%s is not a version 4, RFC 4122 variant UUID", u)
				}
			}
		})
	}
	wg.Wait()
	checkAllocs(t, "NewUUID", 0, func() { NewUUID() })
}

// A delivery count and a completion each cost the write one allocation
// for their keys and record, and write what the separate keys did.
func TestStateAndDeleteKeysAllocateOnce(t *testing.T) {
	q := &queue{id: 7}
	st := stateRec{state: StateActive, deliveryCount: 3, owner: 9, expiresAt: 1 << 40, size: 1024, sessionID: "s"}
	w := &write{}
	checkAllocs(t, "setState", 1, func() {
		w.batch.Ops = w.batch.Ops[:0]
		w.setState(q, 42, &st)
	})
	checkAllocs(t, "deleteRecords", 1, func() {
		w.batch.Ops = w.batch.Ops[:0]
		w.deleteRecords(q, 42, 9, false)
	})

	w.batch.Ops = nil
	w.setState(q, 42, &st)
	w.deleteRecords(q, 42, 9, false)
	want := []storage.Op{
		{Kind: storage.OpSet, Key: seqKey(tabState, 7, 42), Value: st.encode(nil)},
		{Kind: storage.OpDelete, Key: seqKey(tabState, 7, 42)},
		{Kind: storage.OpDelete, Key: seqKey(tabBody, 9, 42)},
	}
	if len(w.batch.Ops) != len(want) {
		t.Fatalf("%d ops, want %d", len(w.batch.Ops), len(want))
	}
	for i, op := range w.batch.Ops {
		if op.Kind != want[i].Kind || !bytes.Equal(op.Key, want[i].Key) || !bytes.Equal(op.Value, want[i].Value) {
			t.Errorf("op %d: %v %x %x, want %v %x %x", i, op.Kind, op.Key, op.Value, want[i].Kind, want[i].Key, want[i].Value)
		}
	}
}

// BenchmarkNewUUID is the cost of a lock token (one per delivery).
func BenchmarkNewUUID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		NewUUID()
	}
}

package core

import (
	"bytes"
	"sync"
	"testing"

	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/memstore"
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

// A delivery count and a completion each cost a write of one message
// one allocation for their keys and record, a write of a hundred a few
// allocations for all of them (8, where it took 200), and they write
// what the separate keys did.
func TestStateAndDeleteKeysAllocateOnce(t *testing.T) {
	q := &queue{id: 7}
	st := stateRec{state: StateActive, deliveryCount: 3, owner: 9, expiresAt: 1 << 40, size: 1024, sessionID: "s"}
	w := &write{}
	checkAllocs(t, "setState", 1, func() {
		w.batch.Ops, w.room, w.roomSize = w.batch.Ops[:0], nil, 0
		w.setState(q, 42, &st)
	})
	checkAllocs(t, "deleteRecords", 1, func() {
		w.batch.Ops, w.bodies.Ops, w.room, w.roomSize = w.batch.Ops[:0], w.bodies.Ops[:0], nil, 0
		w.deleteRecords(q, 42, 9, false)
	})
	w.batch.Ops, w.bodies.Ops = make([]storage.Op, 0, 200), make([]storage.Op, 0, 100)
	checkAllocs(t, "a hundred setState and deleteRecords", 8, func() {
		w.batch.Ops, w.bodies.Ops, w.room, w.roomSize = w.batch.Ops[:0], w.bodies.Ops[:0], nil, 0
		for seq := range int64(100) {
			w.setState(q, seq, &st)
			w.deleteRecords(q, seq, 9, false)
		}
	})
	w.batch.Ops, w.bodies.Ops, w.room, w.roomSize = w.batch.Ops[:0], w.bodies.Ops[:0], nil, 0
	for seq := range int64(100) {
		w.setState(q, seq, &st)
		w.deleteRecords(q, seq, 9, false)
	}
	for i, op := range w.batch.Ops { // the keys and records did not overlap
		want := seqKey(tabState, q.id, int64(i/2))
		if !bytes.Equal(op.Key, want) {
			t.Fatalf("op %d: key % x, want % x", i, op.Key, want)
		}
		if i%2 == 0 && !bytes.Equal(op.Value, st.encode(nil)) {
			t.Fatalf("op %d: state record % x, want % x", i, op.Value, st.encode(nil))
		}
	}
	w.batch.Ops, w.bodies.Ops, w.room, w.roomSize = nil, nil, nil, 0

	w.batch.Ops, w.bodies.Ops = nil, nil
	w.setState(q, 42, &st)
	w.deleteRecords(q, 42, 9, false)
	w.batch.Ops = append(w.batch.Ops, w.bodies.Ops...) // as commit does
	want := []storage.Op{
		{Kind: storage.OpSet, Key: seqKey(tabState, 7, 42), Value: st.encode(nil)},
		{Kind: storage.OpDelete, Key: seqKey(tabState, 7, 42)},
		{Kind: storage.OpDeleteOnce, Key: seqKey(tabBody, 9, 42)},
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

// A send's batch holds every other record first and the state records
// last, each run in the order the messages were sent: the store's
// memtable inserts a run of increasing keys next to the one before,
// where alternating body and state keys made it search for each.
func TestSendBatchPutsStateRecordsLast(t *testing.T) {
	b, err := New(Config{Store: memstore.New()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if _, err := b.CreateEntity(t.Context(), Entity{Kind: KindQueue, Name: "q"}); err != nil {
		t.Fatal(err)
	}
	msgs := []*Message{{Body: []byte("1")}, {Body: []byte("2")}, {Body: []byte("3")}}
	p, err := b.planSend("q", msgs, true)
	if err != nil {
		t.Fatal(err)
	}
	var tabs []byte
	var prev []byte
	for _, op := range p.ops().Ops {
		tab := op.Key[0]
		if len(tabs) == 0 || tabs[len(tabs)-1] != tab {
			tabs = append(tabs, tab)
		} else if bytes.Compare(prev, op.Key) >= 0 {
			t.Errorf("key %x after %x in one run: not increasing", op.Key, prev)
		}
		prev = op.Key
	}
	if i := bytes.IndexByte(tabs, tabState); i < 0 || i != len(tabs)-1 || bytes.Count(tabs, []byte{tabBody}) != 1 {
		t.Errorf("runs of tables %q: want one run of bodies and the states last", tabs)
	}
	if err := p.commit(); err != nil {
		t.Fatal(err)
	}
}

// applyRecorder is a store that keeps the operations of the last batch
// applied to it.
type applyRecorder struct {
	storage.Store
	last []storage.Op
}

func (r *applyRecorder) Apply(b *storage.Batch) error {
	r.last = append([]storage.Op(nil), b.Ops...)
	return r.Store.Apply(b)
}

// A completion of several messages deletes their state records, then
// their bodies, each run in order (see write.bodies).
func TestCompletionDeletesStatesThenBodies(t *testing.T) {
	rec := &applyRecorder{Store: memstore.New()}
	b, err := New(Config{Store: rec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if _, err := b.CreateEntity(t.Context(), Entity{Kind: KindQueue, Name: "q"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Send(t.Context(), "q", &Message{Body: []byte("1")}, &Message{Body: []byte("2")}, &Message{Body: []byte("3")}); err != nil {
		t.Fatal(err)
	}
	got, err := b.Receive(t.Context(), "q", ReceiveOptions{Mode: PeekLock, Max: 3})
	if err != nil || len(got) != 3 {
		t.Fatalf("received %d, %v", len(got), err)
	}
	var toks []LockToken
	for _, m := range got {
		toks = append(toks, m.LockToken)
	}
	for i, err := range b.CompleteMany("q", toks, true) {
		if err != nil {
			t.Fatalf("complete %d: %v", i, err)
		}
	}
	var tabs []byte
	for _, op := range rec.last {
		// A body is deleted once (it was set once: write.deleteRecords).
		if want := map[byte]storage.OpKind{tabState: storage.OpDelete, tabBody: storage.OpDeleteOnce}[op.Key[0]]; op.Kind != want {
			t.Fatalf("the completion's batch holds a %v of %q, want %v", op.Kind, op.Key[0], want)
		}
		if len(tabs) == 0 || tabs[len(tabs)-1] != op.Key[0] {
			tabs = append(tabs, op.Key[0])
		}
	}
	if string(tabs) != string([]byte{tabState, tabBody}) || len(rec.last) != 6 {
		t.Errorf("the completion deleted %d records in runs of tables %q, want 6: the states, then the bodies", len(rec.last), tabs)
	}
}

package raftstore

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/omnibusmq/omnibus/storage"
)

// Every kind of operation survives encoding, DeleteOnce (kind 4) and a
// Set marked New (5), added later, among them.
func TestCodecRoundTrip(t *testing.T) {
	b := &storage.Batch{}
	b.Set([]byte("k1"), []byte("v1"))
	b.SetNew([]byte("k4"), []byte("v4"))
	b.Delete([]byte("k2"))
	b.DeletePrefix([]byte("p/"))
	b.DeleteOnce([]byte("k3"))
	h := entryHeader{node: 7, nonce: 9, first: 1, count: 1}
	enc, err := encodeBatch(appendHeader(nil, h), b)
	if err != nil {
		t.Fatal(err)
	}
	got, ops, err := decodeEntry(enc, nil)
	if err != nil {
		t.Fatalf("decodeEntry: %v", err)
	}
	if got != h {
		t.Errorf("header %+v, want %+v", got, h)
	}
	if len(ops) != len(b.Ops) {
		t.Fatalf("%d ops, want %d", len(ops), len(b.Ops))
	}
	for i, op := range ops {
		want := b.Ops[i]
		if op.Kind != want.Kind || op.New != want.New || !bytes.Equal(op.Key, append([]byte{dataPrefix}, want.Key...)) || !bytes.Equal(op.Value, want.Value) {
			t.Errorf("op %d = %d (new %v) %q %q, want %d (new %v) %q %q", i, op.Kind, op.New, op.Key, op.Value, want.Kind, want.New, want.Key, want.Value)
		}
	}
}

// An entry written before DeleteOnce existed still decodes, byte for byte
// as it was written then; a kind beyond the Set marked New does not.
func TestCodecOldEntriesAndUnknownKinds(t *testing.T) {
	old := []byte{entryVersion, 7}
	old = binary.BigEndian.AppendUint64(old, 9)
	old = append(old, 1, 1) // first 1, count 1
	old = append(old, 3,    // three ops
		1, 3, 'd', 'k', '1', 2, 'v', '1', // Set dk1 = v1
		2, 3, 'd', 'k', '2', // Delete dk2
		3, 3, 'd', 'p', '/') // DeletePrefix dp/
	_, ops, err := decodeEntry(old, nil)
	if err != nil {
		t.Fatalf("an entry of the format before DeleteOnce: %v", err)
	}
	if len(ops) != 3 || ops[0].Kind != storage.OpSet || string(ops[0].Value) != "v1" ||
		ops[1].Kind != storage.OpDelete || ops[2].Kind != storage.OpDeletePrefix {
		t.Fatalf("decoded %+v", ops)
	}
	bad := append([]byte(nil), old...)
	bad[len(bad)-4] = opCodeSetNew + 1 // the DeletePrefix's kind
	if _, _, err := decodeEntry(bad, nil); err == nil {
		t.Fatal("an entry with an unknown kind decoded")
	}
	if _, err := encodeBatch(nil, &storage.Batch{Ops: []storage.Op{{Kind: storage.OpDeleteOnce + 1, Key: []byte("k")}}}); err == nil {
		t.Fatal("encodeBatch took an unknown kind")
	}
}

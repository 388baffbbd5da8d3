package raftstore

import (
	"fmt"
	"testing"

	"github.com/omnibusmq/omnibus/storage"
)

// BenchmarkHeldOpsMessages is a follower's hold under the cluster
// benchmark's load, per message: each message's send (its body and its
// state record, both new), its delivery (the state record again) and its
// completion (both deleted) arrive some 30,000 messages apart, and the
// held operations of the messages settled are taken now and then, as a
// ripe hold applies them. Every operation of a message is dropped.
func BenchmarkHeldOpsMessages(b *testing.B) {
	const (
		live      = 30000 // messages between a send and its completion
		takeEvery = 2048  // messages between two takes
	)
	// Keys as core's, made ahead (a follower decodes them from its
	// entries) and used again once their message is long settled:
	// keys[bodyKey][seq % keyRing], keys[stateKey][...].
	const (
		keyRing           = 1 << 16
		bodyKey, stateKey = 0, 1
	)
	var keys [2][keyRing][]byte
	for seq := range keyRing {
		for k, kind := range []byte{'b', 's'} {
			keys[k][seq] = fmt.Appendf(nil, "d\x00q/orders-%03d/%c/%016x", seq%9, kind, seq)
		}
	}
	body := make([]byte, 1024)
	h := newHeldOps()
	var dst []storage.Op
	send := func(seq int) {
		h.add(storage.Op{Kind: storage.OpSet, New: true, Key: keys[bodyKey][seq%keyRing], Value: body})
		h.add(storage.Op{Kind: storage.OpSet, New: true, Key: keys[stateKey][seq%keyRing], Value: []byte("state")})
	}
	settle := func(seq int) {
		h.add(storage.Op{Kind: storage.OpSet, Key: keys[stateKey][seq%keyRing], Value: []byte("state2")})
		h.add(storage.Op{Kind: storage.OpDeleteOnce, Key: keys[bodyKey][seq%keyRing]})
		h.add(storage.Op{Kind: storage.OpDelete, Key: keys[stateKey][seq%keyRing]})
	}
	// sentBy[seq % live]: the position after message seq's send.
	sentBy := make([]int, live)
	for seq := range live {
		send(seq)
		sentBy[seq] = h.end()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		settled := sentBy[i%live] // every message sent by then is settled now
		send(live + i)
		sentBy[i%live] = h.end()
		settle(i)
		if i%takeEvery == takeEvery-1 {
			dst = h.take(settled, dst[:0])
		}
	}
	if len(dst) != 0 {
		b.Fatalf("%d operations applied: every message's should have been dropped", len(dst))
	}
}

package raftstore

import (
	"bytes"
	"hash/maphash"

	"github.com/omnibusmq/omnibus/storage"
)

// Coalescing a follower's held applies (apply.go, holdApplies). A
// message that lives shorter than the hold is set and deleted within one
// batch of the state database: its body is set by the send and deleted
// once by the completion, its state record set by the send (marked New:
// its sequence number was just assigned), set again by a delivery count
// and deleted by the completion. Applied as they are, those are five
// inserts into Pebble's memtable, a copy of the body among them, then a
// flush that finds them cancelled and a tombstone compacted down the
// levels. coalesceOps drops what a later operation of the same batch
// makes invisible, so the batch applied holds nothing of that message.
//
// What is dropped, for one key, in batch order:
//   - a Set followed by another Set: the first; the second inherits the
//     first's New mark (it now meets what the first met);
//   - a Set followed by a Delete: the Set, and the Delete too when the
//     Set was marked New (storage.Batch.SetNew: the key held no value
//     before it, so it holds none after either way); otherwise the
//     Delete stays, for a value applied before the batch may lie under
//     it;
//   - a Set followed by a DeleteOnce: both. DeleteOnce's contract
//     (storage.Batch.DeleteOnce) is that the key was set at most once
//     since it was last deleted, so that Set is the only value the
//     deletion can meet, and the key is absent afterwards either way.
//
// A DeletePrefix is a barrier: nothing before it is matched with anything
// after it. The result is the batch with those operations removed, in
// their order, sharing ops's array.
func coalesceOps(ops []storage.Op, seed maphash.Seed) []storage.Op {
	// lastSet: a key's hash → the index of its latest Set still kept with
	// no deletion of it after. Hashes that collide only lose a chance to
	// drop something: every match is checked on the keys' bytes.
	lastSet := make(map[uint64]int, len(ops)/2)
	dropped := 0
	for i := range ops {
		op := &ops[i]
		if op.Kind == storage.OpDeletePrefix {
			clear(lastSet)
			continue
		}
		h := maphash.Bytes(seed, op.Key)
		j, ok := lastSet[h]
		matched := ok && bytes.Equal(ops[j].Key, op.Key)
		switch op.Kind {
		case storage.OpSet:
			if matched {
				op.New = ops[j].New
				ops[j].Kind = opDropped
				dropped++
			}
			lastSet[h] = i
		case storage.OpDelete:
			if matched {
				if ops[j].New {
					op.Kind = opDropped
					dropped++
				}
				ops[j].Kind = opDropped
				dropped++
				delete(lastSet, h)
			}
		case storage.OpDeleteOnce:
			if matched {
				ops[j].Kind = opDropped
				op.Kind = opDropped
				dropped += 2
				delete(lastSet, h)
			}
		}
	}
	if dropped == 0 {
		return ops
	}
	kept := ops[:0]
	for _, op := range ops {
		if op.Kind != opDropped {
			kept = append(kept, op)
		}
	}
	return kept
}

// opDropped marks an operation coalesceOps removes; no storage.OpKind is 0.
const opDropped storage.OpKind = 0

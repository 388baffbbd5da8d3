package raftstore

import (
	"bytes"
	"hash/maphash"

	"github.com/omnibusmq/omnibus/storage"
)

// Coalescing a follower's held applies (hold.go). A message that lives
// shorter than the hold is set and deleted while a follower holds both:
// its body is set by the send and deleted once by the completion, its
// state record set by the send (marked New: its sequence number was just
// assigned), set again by a delivery count and deleted by the
// completion. Applied as they are, those are five inserts into Pebble's
// memtable, a copy of the body among them, then a flush that finds them
// cancelled and a tombstone compacted down the levels. heldOps drops, as
// each operation arrives, what it makes invisible among the operations
// still held, so what is applied holds nothing of that message.
//
// What is dropped, for one key, in arrival order:
//   - a Set followed by another Set: the first; the second inherits the
//     first's New mark (it now meets what the first met);
//   - a Set followed by a Delete: the Set, and the Delete too when the
//     Set was marked New (storage.Batch.SetNew: the key held no value
//     before it, so it holds none after either way); otherwise the
//     Delete stays, for a value applied before may lie under it;
//   - a Set followed by a DeleteOnce: both. DeleteOnce's contract
//     (storage.Batch.DeleteOnce) is that the key was set at most once
//     since it was last deleted, so that Set is the only value the
//     deletion can meet, and the key is absent afterwards either way.
//
// Only a Set still held is matched: once applied (take), the key holds
// its value in the state database and a later deletion must reach it. A
// DeletePrefix is a barrier: nothing before it is matched with anything
// after it.
//
// The held operations are applied oldest first, a prefix at a time,
// while younger ones stay held (hold.go): a Set applied in a prefix may
// then lack because a younger deletion, not applied yet, dropped it. The
// state database is then, until the rest is applied, not the state as
// of its applied index but one the rest of the log leads to the same
// end: replaying the log after that index (as after a restart) applies
// the younger operations to it unchanged, and each finds what the
// dropped Set would have left for it to overwrite or delete (nothing, or
// the value under that Set), with the same outcome. Nothing reads a
// follower's state database while it holds (hold.go).

// heldOps is a follower's held operations, coalesced as they arrive.
// Positions are absolute: the operation at base is held first, and a
// position stays the same while operations before it are taken.
//
// The operations are kept in blocks of a fixed size rather than one
// slice: a follower takes the oldest quarter of what it holds at a time
// (hold.go), and moving the rest down a slice after each take cost it
// 6–11 % of its CPU (a typed copy, with the collector's write barriers, of some
// 100,000 operations twice a second). Taking now frees whole blocks.
type heldOps struct {
	// blocks hold the operations: the one at base is blocks[0][first],
	// and every block but the last is full. Taken slots are zeroed (no
	// reference into the entries outlives its take).
	blocks [][]storage.Op
	first  int
	n      int // operations held
	size   int // operations per block
	spare  [][]storage.Op
	base   int
	// lastSet: a key's hash → the position of its latest Set still held
	// and kept with no deletion of it after. Hashes that collide only
	// lose a chance to drop something: every match is checked on the
	// keys' bytes.
	lastSet setIndex
	seed    maphash.Seed
}

// heldOpsBlock is the operations a block of heldOps holds (56 B each:
// 224 KiB a block), and heldOpsSpare how many emptied blocks it keeps for
// the operations to come.
const (
	heldOpsBlock = 4096
	heldOpsSpare = 8
)

func newHeldOps() heldOps { return newHeldOpsBlocks(heldOpsBlock) }

// newHeldOpsBlocks is newHeldOps with size operations a block (tests use
// small ones to cross blocks often).
func newHeldOpsBlocks(size int) heldOps {
	return heldOps{size: size, lastSet: newSetIndex(), seed: maphash.MakeSeed()}
}

// end is the position the next operation added takes.
func (h *heldOps) end() int { return h.base + h.n }

// at is the operation at position pos, held.
func (h *heldOps) at(pos int) *storage.Op {
	i := h.first + pos - h.base
	return &h.blocks[i/h.size][i%h.size]
}

// push holds op at position end().
func (h *heldOps) push(op storage.Op) {
	i := h.first + h.n
	if i == len(h.blocks)*h.size {
		var b []storage.Op
		if k := len(h.spare); k > 0 {
			b, h.spare = h.spare[k-1], h.spare[:k-1]
		} else {
			b = make([]storage.Op, h.size)
		}
		h.blocks = append(h.blocks, b)
	}
	h.blocks[i/h.size][i%h.size] = op
	h.n++
}

// add holds op after dropping what it hides among the held operations,
// and returns how many operations (op among them) were dropped. A dropped
// op is not kept at all.
func (h *heldOps) add(op storage.Op) int {
	if op.Kind == storage.OpDeletePrefix {
		h.lastSet.clear()
		h.push(op)
		return 0
	}
	hash := maphash.Bytes(h.seed, op.Key)
	h.lastSet.reserve()
	slot, j, held := h.lastSet.lookup(hash)
	var prev *storage.Op
	if held {
		if p := h.at(j); bytes.Equal(p.Key, op.Key) {
			prev = p
		}
	}
	dropped := 0
	switch op.Kind {
	case storage.OpSet:
		if prev != nil {
			op.New = prev.New
			prev.Kind = opDropped
			dropped++
		}
		h.lastSet.setAt(slot, held, hash, h.end())
	case storage.OpDelete:
		if prev != nil {
			prev.Kind = opDropped
			dropped++
			h.lastSet.delAt(slot)
			if prev.New {
				return dropped + 1
			}
		}
	case storage.OpDeleteOnce:
		if prev != nil {
			prev.Kind = opDropped
			h.lastSet.delAt(slot)
			return 2
		}
	}
	h.push(op)
	return dropped
}

// take appends to dst the operations kept before position end, oldest
// first, and holds them no more: a later deletion of one of their keys
// is not matched with them (the state database holds their values).
func (h *heldOps) take(end int, dst []storage.Op) []storage.Op {
	n := end - h.base
	for i := range n {
		op := h.at(h.base + i)
		if op.Kind != opDropped {
			if op.Kind == storage.OpSet {
				hash := maphash.Bytes(h.seed, op.Key)
				if slot, j, held := h.lastSet.lookup(hash); held && j == h.base+i {
					h.lastSet.delAt(slot)
				}
			}
			dst = append(dst, *op)
		}
		*op = storage.Op{} // drop its references into the entries
	}
	h.base, h.first, h.n = end, h.first+n, h.n-n
	// Free the blocks taken whole (all of them once nothing is held).
	free := h.first / h.size
	if h.n == 0 {
		free, h.first = len(h.blocks), 0
	} else {
		h.first %= h.size
	}
	for _, b := range h.blocks[:free] {
		if len(h.spare) < heldOpsSpare {
			h.spare = append(h.spare, b)
		}
	}
	rest := copy(h.blocks, h.blocks[free:])
	clear(h.blocks[rest:])
	h.blocks = h.blocks[:rest]
	return dst
}

// opDropped marks an operation heldOps dropped; no storage.OpKind is 0.
const opDropped storage.OpKind = 0

package raftstore

// setIndex is heldOps's lastSet: a key's hash → the position of its
// latest Set still held. A follower's hold looks a key up for every
// operation it holds (five per message under load, at ~30,000 messages
// held), and a lookup of Go's map, whose groups spread a slot's control
// word and its key and value over two or three cache lines, cost about a
// third of a one-group follower's hold (the profiles of 2026-12-01,
// storage/raftstore/RESULTS.md). Here a slot is 16 bytes, four to a cache
// line: open addressing with linear probing, at most half full, so a
// lookup usually reads one line; a deletion shifts the entries after it
// back instead of leaving a tombstone, so lookups do not lengthen as keys
// come and go.
type setIndex struct {
	slots []setSlot // a power of two of them
	n     int       // slots in use
}

// setSlot is one entry; pos is the position plus one (0: the slot is
// free).
type setSlot struct {
	hash uint64
	pos  int
}

// Bounds of a setIndex's table: it starts at minSetSlots, doubles when
// it would be more than half full, and halves when under an eighth full
// (a burst's table is not kept for good).
const minSetSlots = 1 << 10

func newSetIndex() setIndex { return setIndex{slots: make([]setSlot, minSetSlots)} }

// len is how many hashes the index holds.
func (s *setIndex) len() int { return s.n }

// reserve makes room for one more hash, so that a slot lookup returns
// stays valid for setAt.
func (s *setIndex) reserve() {
	if (s.n+1)*2 > len(s.slots) {
		s.resize(len(s.slots) * 2)
	}
}

// lookup returns the slot holding hash and the position recorded for it,
// or (ok false) the free slot where hash would go.
func (s *setIndex) lookup(hash uint64) (slot, pos int, ok bool) {
	mask := len(s.slots) - 1
	for i := int(hash) & mask; ; i = (i + 1) & mask {
		sl := &s.slots[i]
		if sl.pos == 0 {
			return i, 0, false
		}
		if sl.hash == hash {
			return i, sl.pos - 1, true
		}
	}
}

// setAt records pos for hash in the slot lookup returned for it (after
// reserve), replacing what was recorded there.
func (s *setIndex) setAt(slot int, held bool, hash uint64, pos int) {
	if !held {
		s.n++
	}
	s.slots[slot] = setSlot{hash: hash, pos: pos + 1}
}

// delAt forgets the hash in slot, which lookup found.
func (s *setIndex) delAt(slot int) {
	mask := len(s.slots) - 1
	i := slot
	// Shift back each following entry whose probe passed over slot i.
	for j := (i + 1) & mask; s.slots[j].pos != 0; j = (j + 1) & mask {
		home := int(s.slots[j].hash) & mask
		if (j-home)&mask >= (j-i)&mask {
			s.slots[i] = s.slots[j]
			i = j
		}
	}
	s.slots[i] = setSlot{}
	s.n--
	if s.n*8 < len(s.slots) && len(s.slots) > minSetSlots {
		s.resize(len(s.slots) / 2)
	}
}

// clear forgets every hash.
func (s *setIndex) clear() {
	if len(s.slots) > minSetSlots {
		s.slots = make([]setSlot, minSetSlots)
	} else {
		clear(s.slots)
	}
	s.n = 0
}

// resize moves the entries into a table of size slots.
func (s *setIndex) resize(size int) {
	old := s.slots
	s.slots = make([]setSlot, size)
	for _, sl := range old {
		if sl.pos != 0 {
			i, _, _ := s.lookup(sl.hash)
			s.slots[i] = sl
		}
	}
}

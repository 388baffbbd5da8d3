package raftstore

import (
	"math/rand/v2"
	"testing"
)

// TestSetIndexAgreesWithAMap puts, replaces and deletes random hashes,
// many sharing their low bits (long probe runs, deletions shifting them
// back), in phases that grow the table and shrink it again, and checks
// every answer against a map's.
func TestSetIndexAgreesWithAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	s, want := newSetIndex(), map[uint64]int{}
	var known []uint64
	most := 0       // the most slots the table had
	steps := 200000 // four rounds of growing and shrinking
	if raceEnabled {
		steps = 50000 // one round: grows past 16*minSetSlots, then shrinks back
	}
	for step := range steps {
		growing := (step/25000)%2 == 0
		if r := rng.IntN(10); r < 2 || growing && r < 7 || len(known) == 0 {
			h := rng.Uint64N(1<<20)<<32 | rng.Uint64N(64) // low bits: 64 values
			if rng.IntN(4) == 0 && len(known) > 0 {
				h = known[rng.IntN(len(known))] // replace
			}
			s.put(h, step)
			want[h] = step
			known = append(known, h)
		} else {
			i := rng.IntN(len(known))
			h := known[i]
			known[i] = known[len(known)-1]
			known = known[:len(known)-1]
			s.del(h)
			delete(want, h)
		}
		q := rng.Uint64N(1<<20)<<32 | rng.Uint64N(64)
		if rng.IntN(2) == 0 && len(known) > 0 {
			q = known[rng.IntN(len(known))]
		}
		if got, ok := s.get(q); ok != (want[q] != 0 || hasKey(want, q)) || ok && got != want[q] {
			t.Fatalf("step %d: get(%#x) = %d, %v; want %d, %v", step, q, got, ok, want[q], hasKey(want, q))
		}
		if s.len() != len(want) {
			t.Fatalf("step %d: %d hashes held, want %d", step, s.len(), len(want))
		}
		most = max(most, len(s.slots))
	}
	for h, w := range want {
		if got, ok := s.get(h); !ok || got != w {
			t.Fatalf("get(%#x) = %d, %v at the end; want %d", h, got, ok, w)
		}
	}
	if most < 16*minSetSlots || len(s.slots) > most/4 {
		t.Fatalf("the table grew to %d slots at most and ends at %d for %d hashes: it should grow past %d and shrink back",
			most, len(s.slots), len(want), 16*minSetSlots)
	}
	s.put(7, 1)
	s.clear()
	if _, ok := s.get(7); ok || s.len() != 0 {
		t.Fatal("a cleared index still holds hashes")
	}
}

func hasKey(m map[uint64]int, k uint64) bool { _, ok := m[k]; return ok }

// The index's operations as heldOps makes them.
func (s *setIndex) put(hash uint64, pos int) {
	s.reserve()
	slot, _, held := s.lookup(hash)
	s.setAt(slot, held, hash, pos)
}

func (s *setIndex) get(hash uint64) (int, bool) {
	_, pos, held := s.lookup(hash)
	return pos, held
}

func (s *setIndex) del(hash uint64) {
	if slot, _, held := s.lookup(hash); held {
		s.delAt(slot)
	}
}

package core

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRecHeapKeepsOrderAndPositions pushes, removes and pops records in a
// random order and checks, after every step, that each record knows its
// position and that pops come out in sequence order.
func TestRecHeapKeepsOrderAndPositions(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h recHeap
	in := map[int64]*msgRec{}
	check := func(step int) {
		t.Helper()
		for i, r := range h {
			if int(r.idx) != i {
				t.Fatalf("step %d: record %d at %d thinks it is at %d", step, r.seq, i, r.idx)
			}
			if p := (i - 1) / 2; i > 0 && h[p].seq > r.seq {
				t.Fatalf("step %d: parent %d above child %d", step, h[p].seq, r.seq)
			}
		}
	}
	next := int64(1)
	for step := range 5000 {
		switch op := rng.IntN(10); {
		case op < 5: // sends arrive in order, returns out of it
			seq := next
			if rng.IntN(4) == 0 && next > 10 {
				seq = rng.Int64N(next-1) + 1
			}
			if in[seq] != nil {
				continue
			}
			if seq == next {
				next++
			}
			r := &msgRec{seq: seq, idx: -1}
			in[seq] = r
			h.push(r)
		case op < 7 && len(h) > 0:
			r := h.remove(rng.IntN(len(h)))
			if r.idx != -1 {
				t.Fatalf("step %d: removed record keeps position %d", step, r.idx)
			}
			delete(in, r.seq)
		case len(h) > 0:
			seqs := make([]int64, 0, len(in))
			for s := range in {
				seqs = append(seqs, s)
			}
			r := h.pop()
			if want := slices.Min(seqs); r.seq != want {
				t.Fatalf("step %d: popped %d, want %d", step, r.seq, want)
			}
			delete(in, r.seq)
		}
		check(step)
	}
}

// BenchmarkRecHeapFIFO is a queue's available heap under a send and a
// peek-lock receive: records pushed in sequence order, 10,000 deep,
// popped from the head. Per operation one pop and one push (the popped
// record, sent again).
func BenchmarkRecHeapFIFO(b *testing.B) {
	var h recHeap
	seq := int64(0)
	for range 10000 {
		seq++
		h.push(&msgRec{seq: seq, idx: -1})
	}
	for b.Loop() {
		r := h.pop() // delivered; the same record comes back as the next send
		seq++
		r.seq = seq
		h.push(r)
	}
}

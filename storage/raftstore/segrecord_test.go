package raftstore

import (
	"bytes"
	"math/rand/v2"
	"path/filepath"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
)

// TestAddEntryWritesWhatAddProtoWrites: records of entries of every size
// around gatherMinBytes, of every type and of large terms and indexes,
// among other records, come out byte for byte as the encoding into the
// buffer (addProto) lays them out, and the Data of those at or over
// gatherMinBytes are written from where they are, not copied.
func TestAddEntryWritesWhatAddProtoWrites(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	gathered, copied := 0, 0
	for round := range 40 {
		ents := make([]pb.Entry, 1+rng.IntN(30))
		for i := range ents {
			e := pb.Entry{Term: rng.Uint64N(1 << (1 + rng.IntN(63))), Index: rng.Uint64N(1 << (1 + rng.IntN(63))),
				Type: pb.EntryType(rng.IntN(3))}
			if n := rng.IntN(3 * gatherMinBytes); n > 0 || rng.IntN(2) == 0 {
				e.Data = randomBytes(rng, n)
			}
			if round == 0 && i == 0 {
				e.Data = make([]byte, 1<<20) // a length of three varint bytes
			}
			ents[i] = e
		}
		hs := pb.HardState{Term: 7, Vote: 2, Commit: uint64(round)}
		want := &recordWriter{id: 3, tag: 5}
		got := &recordWriter{id: 3, tag: 5}
		want.reset(uint64(round+1), int64(round)*4096, int64(round)*4096)
		got.reset(uint64(round+1), int64(round)*4096, int64(round)*4096)
		for _, w := range []*recordWriter{want, got} {
			if err := w.addProto(recHardState, &hs); err != nil {
				t.Fatal(err)
			}
		}
		for i := range ents {
			if err := want.addProto(recEntry, &ents[i]); err != nil {
				t.Fatal(err)
			}
			if err := got.addEntry(&ents[i]); err != nil {
				t.Fatal(err)
			}
		}
		if err := got.addProto(recHardState, &hs); err != nil {
			t.Fatal(err)
		}
		if err := want.addProto(recHardState, &hs); err != nil {
			t.Fatal(err)
		}
		pieces := got.pieces(nil)
		if b := bytes.Join(pieces, nil); !bytes.Equal(b, want.buf) || got.size() != len(want.buf) {
			t.Fatalf("round %d: the gathered records (%d bytes, size %d) differ from the encoded ones (%d bytes)",
				round, len(b), got.size(), len(want.buf))
		}
		for i := range ents {
			aliased := false
			for _, p := range pieces {
				if len(p) > 0 && len(ents[i].Data) > 0 && &p[0] == &ents[i].Data[0] {
					aliased = true
				}
			}
			if aliased != (len(ents[i].Data) >= gatherMinBytes) {
				t.Fatalf("round %d, entry %d of %d bytes: written from where it is: %v", round, i, len(ents[i].Data), aliased)
			}
			if aliased {
				gathered++
			} else {
				copied++
			}
		}
	}
	if gathered == 0 || copied == 0 {
		t.Fatalf("%d entries gathered, %d copied: both kinds are needed", gathered, copied)
	}
}

// TestWritevAtWritesTheConcatenation: more buffers than one pwritev
// takes, some empty, land in the file one after another from the offset.
func TestWritevAtWritesTheConcatenation(t *testing.T) {
	f, err := osLogFS{}.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rng := rand.New(rand.NewPCG(11, 12))
	bufs := make([][]byte, 3*maxIOV+17)
	for i := range bufs {
		bufs[i] = randomBytes(rng, rng.IntN(40))
	}
	want := bytes.Join(bufs, nil)
	n, err := f.WritevAt(bufs, 100)
	if err != nil || n != len(want) {
		t.Fatalf("WritevAt: %d bytes, %v; want %d", n, err, len(want))
	}
	got := make([]byte, len(want))
	if _, err := f.ReadAt(got, 100); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the file does not hold the buffers one after another")
	}
}

// TestDropWrittenLeavesTheRest: after any number of bytes of any buffers
// (some empty) are written, what is left is the rest of their
// concatenation, starting with a byte.
func TestDropWrittenLeavesTheRest(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for range 2000 {
		bufs := make([][]byte, rng.IntN(8))
		for i := range bufs {
			bufs[i] = randomBytes(rng, rng.IntN(5))
		}
		all := bytes.Join(bufs, nil)
		n := rng.IntN(len(all) + 1)
		left := dropWritten(bufs, n)
		if got := bytes.Join(left, nil); !bytes.Equal(got, all[n:]) {
			t.Fatalf("%d of % x written: left % x, want % x", n, all, got, all[n:])
		}
		if len(left) > 0 && len(left[0]) == 0 {
			t.Fatalf("%d of % x written: what is left starts with an empty buffer", n, all)
		}
	}
}

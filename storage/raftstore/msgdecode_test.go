package raftstore

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"
	"unsafe"

	pb "go.etcd.io/raft/v3/raftpb"
)

// sampleMessages are raft messages of every shape a peer sends: appends
// with entries (empty, nil and large Data, conf changes), responses,
// heartbeats, a snapshot, and a message whose responses carry entries.
func sampleMessages() []pb.Message {
	rng := rand.New(rand.NewPCG(1, 2))
	data := func(n int) []byte { return randomBytes(rng, n) }
	ents := []pb.Entry{
		{Term: 3, Index: 10, Type: pb.EntryNormal, Data: data(1200)},
		{Term: 3, Index: 11, Type: pb.EntryNormal}, // a new leader's empty entry
		{Term: 3, Index: 12, Type: pb.EntryConfChangeV2, Data: data(40)},
		{Term: 1 << 40, Index: 1<<63 + 5, Type: pb.EntryNormal, Data: data(70000)},
	}
	return []pb.Message{
		{Type: pb.MsgApp, To: 2, From: 1, Term: 3, LogTerm: 3, Index: 9, Commit: 9, Entries: ents},
		{Type: pb.MsgApp, To: 2, From: 1, Term: 3, LogTerm: 3, Index: 12, Commit: 12},
		{Type: pb.MsgAppResp, To: 1, From: 2, Term: 3, Index: 12, Reject: true, RejectHint: 7},
		{Type: pb.MsgHeartbeat, To: 2, From: 1, Term: 3, Commit: 12, Context: []byte("ctx")},
		{Type: pb.MsgVote, To: 2, From: 3, Term: 4, LogTerm: 3, Index: 12},
		{Type: pb.MsgSnap, To: 3, From: 1, Term: 3, Snapshot: &pb.Snapshot{Data: data(10),
			Metadata: pb.SnapshotMetadata{Index: 100, Term: 3, ConfState: pb.ConfState{Voters: []uint64{1, 2, 3}}}}},
		{Type: pb.MsgStorageAppend, To: raftLocalAppend, From: 1, Term: 3, Entries: ents[:1],
			Responses: []pb.Message{{Type: pb.MsgAppResp, To: 1, From: 2, Index: 10, Entries: ents[1:2]}}},
	}
}

const raftLocalAppend = 1<<64 - 1

// randomBytes is n bytes drawn from rng.
func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.UintN(256))
	}
	return b
}

// TestUnmarshalMessageMatchesGogoproto: every sample decodes to what
// gogoproto's Unmarshal gives. Given a buffer the caller reuses, the
// entries' Data do not point into it (readFrames overwrites it) and the
// entries of one message share one copy; given a buffer handed over
// (owned), they point into it: no copy at all.
func TestUnmarshalMessageMatchesGogoproto(t *testing.T) {
	for _, owned := range []bool{false, true} {
		for i, want := range sampleMessages() {
			b, err := want.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			var ref, got pb.Message
			if err := ref.Unmarshal(b); err != nil {
				t.Fatal(err)
			}
			if err := unmarshalMessage(&got, b, owned); err != nil {
				t.Fatalf("message %d (owned %v): %v", i, owned, err)
			}
			if !reflect.DeepEqual(got, ref) {
				t.Fatalf("message %d (owned %v): decoded\n%+v\nwant (gogoproto)\n%+v", i, owned, got, ref)
			}
			for j, e := range got.Entries {
				if len(e.Data) > 0 && within(e.Data, b) != owned {
					t.Fatalf("message %d (owned %v): entry %d's Data points into the buffer decoded: %v, want %v", i, owned, j, !owned, owned)
				}
			}
			if !owned {
				clear(b) // the caller reuses its buffer
				if !reflect.DeepEqual(got, ref) {
					t.Fatalf("message %d: changed when the caller's buffer was overwritten", i)
				}
			}
		}
	}
}

// within reports whether sub's bytes lie inside buf's.
func within(sub, buf []byte) bool {
	if len(sub) == 0 || len(buf) == 0 {
		return false
	}
	start := uintptr(unsafe.Pointer(&buf[0]))
	p := uintptr(unsafe.Pointer(&sub[0]))
	return p >= start && p+uintptr(len(sub)) <= start+uintptr(len(buf))
}

// TestUnmarshalMessageRefusesWhatGogoprotoRefuses: truncated and
// corrupted encodings fail (or decode) alike.
func TestUnmarshalMessageRefusesWhatGogoprotoRefuses(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i, m := range sampleMessages() {
		b, _ := m.Marshal()
		for cut := 0; cut < len(b); cut += 1 + len(b)/200 {
			checkLikeGogoproto(t, b[:cut])
		}
		for range 300 {
			c := bytes.Clone(b)
			for range 1 + rng.IntN(3) {
				c[rng.IntN(len(c))] = byte(rng.UintN(256))
			}
			checkLikeGogoproto(t, c)
		}
		_ = i
	}
}

func checkLikeGogoproto(t *testing.T, b []byte) {
	t.Helper()
	var ref, got pb.Message
	refErr := ref.Unmarshal(bytes.Clone(b))
	for _, owned := range []bool{false, true} {
		got = pb.Message{}
		gotErr := unmarshalMessage(&got, bytes.Clone(b), owned)
		if (refErr == nil) != (gotErr == nil) {
			t.Fatalf("% x: gogoproto says %v, unmarshalMessage (owned %v) %v", b, refErr, owned, gotErr)
		}
		if refErr == nil && !reflect.DeepEqual(got, ref) {
			t.Fatalf("% x: decoded (owned %v) %+v, gogoproto %+v", b, owned, got, ref)
		}
	}
}

func FuzzUnmarshalMessage(f *testing.F) {
	for _, m := range sampleMessages() {
		b, _ := m.Marshal()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkLikeGogoproto(t, b) })
}

// BenchmarkParseFrameApp: a frame with one MsgApp of 8 entries of 8 KiB
// (about what a busy leader sends a follower per write), read from a
// stream as readFrames does: into a reused buffer, its entries copied
// out ("reused"), or into a frameArena's, which they keep ("arena").
func BenchmarkParseFrameApp(b *testing.B) {
	ents := make([]pb.Entry, 8)
	for i := range ents {
		ents[i] = pb.Entry{Term: 2, Index: uint64(100 + i), Data: bytes.Repeat([]byte{byte(i)}, 8<<10)}
	}
	f := &frame{group: 1, from: 1, to: 2, msgs: []pb.Message{{Type: pb.MsgApp, To: 2, From: 1, Term: 2, Index: 99, LogTerm: 2, Commit: 99, Entries: ents}}}
	data, err := appendFrame(nil, f)
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []struct {
		name string
		max  int // frames up to this size go to the arena
	}{{"reused", 0}, {"arena", keepBufBytes}} {
		b.Run(mode.name, func(b *testing.B) {
			var arena frameArena
			var big []byte
			r := bytes.NewReader(data)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				r.Reset(data)
				if _, err := readFrame(r, &arena, &big, len(data), mode.max); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package pebblestore_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
)

func sdKey(i int) []byte { return fmt.Appendf(nil, "B/%06d", i) }

func sdValue(i int) []byte {
	v := make([]byte, 1024) // a body: kept in a blob file past a flush
	copy(v, fmt.Sprint(i))
	return v
}

func mustApplyT(t *testing.T, s *pebblestore.Store, b *storage.Batch) {
	t.Helper()
	if err := s.Apply(b); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

func checkAbsent(t *testing.T, s *pebblestore.Store, what string, key []byte) {
	t.Helper()
	if v, err := s.Get(key); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("%s: Get(%s) = %d bytes (%.8q), %v; want not found", what, key, len(v), v, err)
	}
}

// Messages sent and settled within one memtable's life leave nothing to
// flush: each DeleteOnce cancels with its Set. Ordinary deletions of the
// same keys must be flushed (they might cover older values).
func TestDeleteOnceLeavesNothingToFlush(t *testing.T) {
	for _, tc := range []struct {
		name  string
		once  bool
		empty bool
	}{{"DeleteOnce", true, true}, {"Delete", false, false}} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustOpen(t, "db", pebblestore.Options{InMemory: true})
			defer s.Close()
			if !s.SingleDeletes() {
				t.Fatal("a new store does not apply DeleteOnce as a single delete")
			}
			const n = 200
			b := &storage.Batch{Sync: true}
			for i := range n {
				b.Set(sdKey(i), sdValue(i))
			}
			mustApplyT(t, s, b)
			b = &storage.Batch{Sync: true}
			for i := range n {
				if tc.once {
					b.DeleteOnce(sdKey(i))
				} else {
					b.Delete(sdKey(i))
				}
			}
			mustApplyT(t, s, b)
			before := s.FlushedBytes()
			if err := s.Flush(); err != nil {
				t.Fatal(err)
			}
			flushed := s.FlushedBytes() - before
			if tc.empty && flushed != 0 {
				t.Errorf("flushing %d sets each cancelled by a DeleteOnce wrote %d bytes, want 0", n, flushed)
			}
			if !tc.empty && flushed == 0 {
				t.Errorf("flushing %d ordinary deletions wrote nothing: the comparison measures nothing", n)
			}
			for i := range n {
				checkAbsent(t, s, "after flush", sdKey(i))
			}
		})
	}
}

// A DeleteOnce must cancel the Set it meets wherever the two are: the Set
// flushed to an sstable (and its value to a blob file) before the
// deletion, a key rewritten (Delete then Set, as the core rewrites a body)
// across flushes, and a crash and restart between them. Nothing deleted
// may come back, after recovery or after compactions.
func TestDeleteOnceAcrossFlushAndCrash(t *testing.T) {
	fs := vfs.NewCrashableMem()
	// Without automatic compactions the two versions of a rewritten key
	// stay in separate sstables until the deletion meets them.
	s := mustOpen(t, "db", pebblestore.WithoutAutoCompactions(pebblestore.Options{FS: fs}))
	const n = 100
	b := &storage.Batch{Sync: true}
	for i := range n {
		b.Set(sdKey(i), sdValue(i))
	}
	mustApplyT(t, s, b)
	if err := s.Flush(); err != nil { // the Sets in an sstable, the values in a blob file
		t.Fatal(err)
	}
	// Rewrite the even keys (Delete + Set in one batch), flushed again.
	b = &storage.Batch{Sync: true}
	for i := 0; i < n; i += 2 {
		b.Delete(sdKey(i))
		b.Set(sdKey(i), append(sdValue(i), "rewritten"...))
	}
	mustApplyT(t, s, b)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	// Delete once every key but each tenth; these stay in the memtable
	// (and the log) when the crash comes.
	b = &storage.Batch{Sync: true}
	for i := range n {
		if i%10 != 0 {
			b.DeleteOnce(sdKey(i))
		}
	}
	mustApplyT(t, s, b)

	img := crashClone(fs, 0, 1) // a crash now: only what was synced survives
	_ = s.Close()
	s = mustOpen(t, "db", pebblestore.WithoutAutoCompactions(pebblestore.Options{FS: img}))
	defer s.Close()
	check := func(what string) {
		t.Helper()
		for i := range n {
			if i%10 != 0 {
				checkAbsent(t, s, what, sdKey(i))
				continue
			}
			v, err := s.Get(sdKey(i))
			if err != nil || len(v) < 1024 {
				t.Fatalf("%s: Get(%s) = %d bytes, %v; want its value", what, sdKey(i), len(v), err)
			}
		}
	}
	check("after the crash")
	if err := s.Flush(); err != nil { // the replayed deletions meet the flushed Sets below
		t.Fatal(err)
	}
	check("after a flush")
	if err := s.CompactAll(); err != nil {
		t.Fatal(err)
	}
	check("after compacting everything")
	if m := s.SingleDeleteMisuses(); m != 0 {
		t.Errorf("Pebble saw %d single deletes meet a key set twice", m)
	}
}

// A database written before DeleteOnce existed may hold a key set twice
// (the core rewrote bodies in place). Opened without the marker, it is
// compacted once before DeleteOnce becomes a SingleDelete, so the older
// value cannot come back.
func TestDeleteOnceUpgradeCompactsFirst(t *testing.T) {
	fs := vfs.NewMem()
	opts := pebblestore.WithoutAutoCompactions(pebblestore.Options{FS: fs}) // the values stay where they are put
	s := mustOpen(t, "db", opts)
	// What an older version left: a value at the bottom of the tree and a
	// newer Set of the same key over it, in the log (flushed to L0 when
	// the store opens again).
	mustApplyT(t, s, &storage.Batch{Sync: true, Ops: []storage.Op{{Kind: storage.OpSet, Key: []byte("k"), Value: []byte("old")}}})
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.CompactAll(); err != nil {
		t.Fatal(err)
	}
	mustApplyT(t, s, &storage.Batch{Sync: true, Ops: []storage.Op{{Kind: storage.OpSet, Key: []byte("k"), Value: []byte("new")}}})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fs.Remove(fs.PathJoin("db", pebblestore.SingleDelMarkName)); err != nil {
		t.Fatal(err)
	}

	s = mustOpen(t, "db", opts)
	defer s.Close()
	if !s.SingleDeletes() {
		t.Fatal("after the upgrade compaction, DeleteOnce is still not a single delete")
	}
	if _, err := fs.Stat(fs.PathJoin("db", pebblestore.SingleDelMarkName)); err != nil {
		t.Fatalf("the marker was not written: %v", err)
	}
	mustApplyT(t, s, &storage.Batch{Sync: true, Ops: []storage.Op{{Kind: storage.OpDeleteOnce, Key: []byte("k")}}})
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.CompactAll(); err != nil {
		t.Fatal(err)
	}
	checkAbsent(t, s, "after DeleteOnce of a key an older version set twice", []byte("k"))
	if m := s.SingleDeleteMisuses(); m != 0 {
		t.Errorf("Pebble saw %d single deletes meet a key set twice", m)
	}
}

// A checkpoint of a database ready for single deletes is ready too: it
// opens without an upgrade compaction.
func TestCheckpointKeepsSingleDeleteMarker(t *testing.T) {
	fs := vfs.NewMem()
	s := mustOpen(t, "db", pebblestore.Options{FS: fs})
	defer s.Close()
	mustApplyT(t, s, &storage.Batch{Sync: true, Ops: []storage.Op{{Kind: storage.OpSet, Key: []byte("k"), Value: []byte("v")}}})
	if err := s.Checkpoint("cp"); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat(fs.PathJoin("cp", pebblestore.SingleDelMarkName)); err != nil {
		t.Fatalf("the checkpoint has no marker: %v", err)
	}
}

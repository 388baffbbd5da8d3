package pebblestore_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
)

// imageHolds opens a crash image of fs (unsynced data dropped) and
// reports whether batch (0, 0) survived.
func imageHolds(t *testing.T, fs *vfs.MemFS, seed uint64) bool {
	t.Helper()
	img := mustOpen(t, "db", pebblestore.Options{FS: crashClone(fs, 0, seed)})
	defer img.Close()
	ok, err := batchState(img, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// A batch applied without Sync reaches the disk within the lazy sync
// delay though nothing else is written. Without the lazy sync a crash
// loses it (checked first, so the second half proves something).
func TestUnsyncedBatchReachesDiskWithinTheDelay(t *testing.T) {
	fs := vfs.NewCrashableMem()
	s := mustOpen(t, "db", pebblestore.Options{FS: fs, LazySyncDelay: -1})
	if err := s.Apply(crashBatch(0, 0, false)); err != nil {
		t.Fatal(err)
	}
	if imageHolds(t, fs, 1) {
		t.Fatal("an unsynced batch survived a crash without any sync: the check below proves nothing")
	}
	s.Close()

	fs = vfs.NewCrashableMem()
	s = mustOpen(t, "db", pebblestore.Options{FS: fs, LazySyncDelay: time.Millisecond})
	defer s.Close()
	if err := s.Apply(crashBatch(0, 0, false)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !imageHolds(t, fs, 2); {
		if time.Now().After(deadline) {
			t.Fatal("an unsynced batch was still not on disk 10 s after a 1 ms lazy sync delay")
		}
		time.Sleep(time.Millisecond)
	}
}

// The lazy sync costs no fsync when a synced commit made the unsynced
// ones durable already, and one when none did.
func TestLazySyncSkipsCoveredWrites(t *testing.T) {
	syncs := new(atomic.Int64)
	s := mustOpen(t, "db", pebblestore.Options{FS: vfs.NewMem(), WALSyncs: syncs, LazySyncDelay: time.Hour})
	defer s.Close()
	apply := func(n int, sync bool) {
		t.Helper()
		if err := s.Apply(crashBatch(0, n, sync)); err != nil {
			t.Fatal(err)
		}
	}
	apply(0, false)
	apply(1, true)
	before := syncs.Load()
	s.SyncLazily()
	if got := syncs.Load() - before; got != 0 {
		t.Errorf("lazy sync after a synced commit: %d fsyncs, want 0", got)
	}
	apply(2, false)
	s.SyncLazily()
	if got := syncs.Load() - before; got != 1 {
		t.Errorf("lazy sync after an unsynced commit: %d fsyncs, want 1", got)
	}
	s.SyncLazily()
	if got := syncs.Load() - before; got != 1 {
		t.Errorf("a second lazy sync with nothing new: %d fsyncs in all, want 1", got)
	}
}

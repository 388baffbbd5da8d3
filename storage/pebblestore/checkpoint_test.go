package pebblestore_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
	"go.uber.org/zap/zaptest"
)

// TestCheckpoint: a checkpoint opens as a store holding what was applied
// before it, synced or not, and nothing applied after it.
func TestCheckpoint(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, filepath.Join(dir, "db"), pebblestore.Options{LazySyncDelay: -1})
	defer s.Close()
	apply := func(k string, sync bool) {
		t.Helper()
		b := &storage.Batch{Sync: sync}
		b.Set([]byte(k), []byte("v-"+k))
		if err := s.Apply(b); err != nil {
			t.Fatal(err)
		}
	}
	apply("synced", true)
	apply("unsynced", false)
	cp := filepath.Join(dir, "cp")
	if err := s.Checkpoint(cp); err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
	apply("after", true)
	if err := s.Checkpoint(cp); err == nil {
		t.Fatal("a checkpoint into an existing directory succeeded")
	}

	c := mustOpen(t, cp, pebblestore.Options{})
	defer c.Close()
	for _, k := range []string{"synced", "unsynced"} {
		if v, err := c.Get([]byte(k)); err != nil || string(v) != "v-"+k {
			t.Errorf("checkpoint Get(%q) = %q, %v", k, v, err)
		}
	}
	if _, err := c.Get([]byte("after")); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("checkpoint holds a key applied after it: %v", err)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(filepath.Join(dir, "closed")); !errors.Is(err, storage.ErrClosed) {
		t.Errorf("Checkpoint after Close = %v, want ErrClosed", err)
	}
}

// A checkpoint copies the live write-ahead log into its own directory,
// and the store must not take the copy's length for how far its own log
// is synced. Pebble reuses old log files for new logs, so the live log's
// file is as long as the old log was, and a copy of it (made whole, old
// bytes included) is far longer than the records the live log holds: the
// store's mark once recorded that length, and the store then refused to
// start again, after a power loss as after a clean close, saying
// acknowledged records were lost when nothing was.
func TestCheckpointLeavesTheLogMarkAlone(t *testing.T) {
	mem := vfs.NewCrashableMem()
	s := mustOpen(t, "db", pebblestore.Options{FS: mem, LazySyncDelay: -1})
	n := 0
	write := func(count int) {
		t.Helper()
		for range count {
			if err := s.Apply(msgBatch(n)); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	// Two flushes: the first log is then free for Pebble to reuse as the
	// third, which holds a few records and the first log's old bytes.
	write(500)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	write(10)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	write(10)
	if size := fileSize(t, mem, newestLog(t, mem, "db")); size < 100<<10 { // ten records are 10 KiB
		t.Fatalf("the live log is %d bytes, not a reused log file: the test needs one", size)
	}
	if err := s.Checkpoint("ck"); err != nil {
		t.Fatal(err)
	}
	s.WriteWALMark()
	img := crashClone(mem, 0, 1) // a power loss right after the mark's fsync
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	for name, fs := range map[string]vfs.FS{"after a clean close": mem, "after a power loss": img} {
		r, err := pebblestore.Open("db", pebblestore.Options{FS: fs, Logger: zaptest.NewLogger(t)})
		if err != nil {
			t.Fatalf("%s, Open = %v; want the store, every record intact", name, err)
		}
		want := map[int]bool{}
		for i := range n {
			want[i] = true
		}
		checkMessages(t, r, want, n)
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

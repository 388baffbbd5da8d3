package pebblestore_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
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

package pebblestore_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
)

// TestNoWAL: without a write-ahead log a batch (Sync or not) is readable
// at once, durable only once flushed, and a checkpoint holds everything
// applied before it.
func TestNoWAL(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "db")
	s := mustOpen(t, db, pebblestore.Options{NoWAL: true})
	put := func(k string, sync bool) {
		t.Helper()
		b := &storage.Batch{Sync: sync}
		b.Set([]byte(k), []byte("v-"+k))
		if err := s.Apply(b); err != nil {
			t.Fatalf("Apply %s: %v", k, err)
		}
		if v, err := s.Get([]byte(k)); err != nil || string(v) != "v-"+k {
			t.Fatalf("Get %s after Apply = %q, %v", k, v, err)
		}
	}
	put("flushed", true)
	done, err := s.StartFlush()
	if err != nil {
		t.Fatal(err)
	}
	<-done
	put("unflushed", true)
	cp := filepath.Join(dir, "cp")
	if err := s.Checkpoint(cp); err != nil {
		t.Fatal(err)
	}
	put("after checkpoint", false)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = mustOpen(t, db, pebblestore.Options{NoWAL: true})
	if _, err := s.Get([]byte("flushed")); err != nil {
		t.Fatalf("a flushed batch after reopening: %v", err)
	}
	// The checkpoint flushed "unflushed"; "after checkpoint" was never
	// flushed, and with no log it is gone.
	if _, err := s.Get([]byte("after checkpoint")); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("an unflushed batch after reopening: %v; want it gone (no write-ahead log)", err)
	}
	s.Close()
	c := mustOpen(t, cp, pebblestore.Options{NoWAL: true})
	defer c.Close()
	for _, k := range []string{"flushed", "unflushed"} {
		if v, err := c.Get([]byte(k)); err != nil || string(v) != "v-"+k {
			t.Fatalf("checkpoint: %s = %q, %v", k, v, err)
		}
	}
}

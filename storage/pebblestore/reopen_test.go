package pebblestore_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestReopenOnDisk writes to a real directory, enough to flush sstables as
// well as fill the WAL, closes, and finds everything again after reopening.
func TestReopenOnDisk(t *testing.T) {
	dir := t.TempDir()
	const n = 3000 // 3000 x 1 KiB: several flushes of a 1 MiB memtable
	value := func(i int) []byte { return fmt.Appendf(nil, "%01024d", i) }

	s := mustOpen(t, dir, pebblestore.Options{MemTableSize: 1 << 20})
	for i := 0; i < n; i += 100 {
		b := &storage.Batch{Sync: true}
		for j := i; j < i+100; j++ {
			b.Set(fmt.Appendf(nil, "m/%05d", j), value(j))
		}
		if err := s.Apply(b); err != nil {
			t.Fatal(err)
		}
	}
	b := &storage.Batch{Sync: true}
	b.DeletePrefix([]byte("m/01")) // m/01000 .. m/01999
	b.Delete([]byte("m/00000"))
	if err := s.Apply(b); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Message bodies (values of 256 bytes and more) are flushed into blob
	// files, apart from the sstables that compactions rewrite.
	if blobs, _ := filepath.Glob(filepath.Join(dir, "*.blob")); len(blobs) == 0 {
		t.Error("no blob files after flushing 1 KiB values: value separation is off")
	}

	s = mustOpen(t, dir, pebblestore.Options{})
	defer s.Close()
	count := 0
	err := s.Scan([]byte("m/"), nil, func(k, v []byte) (bool, error) {
		var i int
		if _, err := fmt.Sscanf(string(k), "m/%05d", &i); err != nil {
			return false, err
		}
		if i == 0 || i >= 1000 && i < 2000 {
			return false, fmt.Errorf("deleted key %q is back", k)
		}
		if string(v) != string(value(i)) {
			return false, fmt.Errorf("key %q holds a wrong value", k)
		}
		count++
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := n - 1000 - 1; count != want {
		t.Fatalf("found %d keys after reopening, want %d", count, want)
	}
}

func TestOpenOptionErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts pebblestore.Options
	}{
		{"InMemoryAndFS", pebblestore.Options{InMemory: true, FS: newMemFS()}},
		{"NegativeCache", pebblestore.Options{InMemory: true, CacheSize: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := pebblestore.Open("db", tc.opts)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
		})
	}
}

func TestInMemory(t *testing.T) {
	s := mustOpen(t, "db", pebblestore.Options{InMemory: true})
	b := &storage.Batch{Sync: true}
	b.Set([]byte("k"), []byte("v"))
	if err := s.Apply(b); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Each InMemory store has a file system of its own.
	s = mustOpen(t, "db", pebblestore.Options{InMemory: true})
	defer s.Close()
	if _, err := s.Get([]byte("k")); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("fresh in-memory store: Get = %v, want ErrNotFound", err)
	}
}

func TestLoggerReceivesPebbleMessages(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	s := mustOpen(t, "db", pebblestore.Options{InMemory: true, Logger: zap.New(core)})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if logs.Len() == 0 {
		t.Fatal("Pebble logged nothing through Options.Logger on open and close")
	}
	for _, e := range logs.All() {
		if e.Level > zapcore.DebugLevel {
			t.Errorf("routine Pebble message at %v, want Debug: %s", e.Level, e.Message)
		}
	}
}

// At Debug the store logs its background work (a switch of write-ahead
// log, a flush), so that a latency tail can be laid beside it.
func TestLoggerReportsBackgroundWorkAtDebug(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	s := mustOpen(t, "db", pebblestore.Options{InMemory: true, Logger: zap.New(core)})
	defer s.Close()
	b := &storage.Batch{Sync: true}
	b.Set([]byte("k"), []byte("v"))
	if err := s.Apply(b); err != nil {
		t.Fatal(err)
	}
	done, err := s.StartFlush()
	if err != nil {
		t.Fatal(err)
	}
	<-done
	for _, msg := range []string{"pebble switched to a new write-ahead log", "pebble flushed a memtable"} {
		found := logs.FilterMessage(msg).All()
		if len(found) == 0 {
			t.Errorf("no %q entry after a flush", msg)
			continue
		}
		if found[0].Level != zapcore.DebugLevel {
			t.Errorf("%q logged at %v, want Debug", msg, found[0].Level)
		}
	}
}

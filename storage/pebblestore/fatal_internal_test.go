package pebblestore

import (
	"errors"
	"testing"

	"github.com/omnibusmq/omnibus/storage"
	"go.uber.org/zap/zaptest"
)

// Pebble's Fatalf never ends the process. Inside one of the store's calls
// it panics up to Store.protect, which makes it the call's error; on any
// other goroutine (Pebble's background work) it returns. Either way the
// store refuses writes from then on, and still reads.
func TestFatalfStopsWritesWithoutExiting(t *testing.T) {
	s, err := Open("db", Options{InMemory: true, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := &storage.Batch{Sync: true}
	b.Set([]byte("k"), []byte("v"))
	if err := s.Apply(b); err != nil {
		t.Fatal(err)
	}
	l := pebbleLogger{s: zaptest.NewLogger(t).Sugar(), onFatal: s.faults.setFatal}

	done := make(chan struct{})
	go func() { // a background goroutine of Pebble's
		defer close(done)
		l.Fatalf("background trouble %d", 1)
	}()
	<-done

	err = s.protect("commit", true, nil, func() error {
		l.Fatalf("commit trouble")
		t.Error("Fatalf returned inside a store call")
		return nil
	})
	if !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("Fatalf inside a store call: protect = %v, want ErrUnavailable", err)
	}
	if err := s.Apply(b); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("Apply after Fatalf = %v, want ErrUnavailable", err)
	}
	if err := s.Health(); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("Health after Fatalf = %v, want ErrUnavailable", err)
	}
	if v, err := s.Get([]byte("k")); err != nil || string(v) != "v" {
		t.Fatalf("Get after Fatalf = %q, %v", v, err)
	}
}

// A panic of Pebble's while reading becomes the read's error; a panic of
// a Scan callback is the caller's and goes on.
func TestPanicsInsideReadsBecomeErrors(t *testing.T) {
	s, err := Open("db", Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.protect("get", false, nil, func() error { panic("pebble: unknown metadata type: <nil>") })
	if !errors.Is(err, storage.ErrCorrupt) {
		t.Fatalf("protect = %v, want ErrCorrupt", err)
	}
	if err := s.Health(); err != nil {
		t.Fatalf("a panic while reading stopped writes: %v", err)
	}
	b := &storage.Batch{}
	b.Set([]byte("k"), []byte("v"))
	if err := s.Apply(b); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if p := recover(); p != "callback's own" {
			t.Fatalf("recovered %v, want the callback's panic", p)
		}
	}()
	_ = s.Scan(nil, nil, func(_, _ []byte) (bool, error) { panic("callback's own") })
}

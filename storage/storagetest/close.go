package storagetest

import (
	"errors"
	"testing"

	"github.com/omnibusmq/omnibus/storage"
)

var closeTests = []test{
	{"ErrClosed", testErrClosed},
	{"Health", testHealth},
}

// testHealth checks a store that reports its health: a fresh store accepts
// writes (nil), a closed one does not, with an error wrapping both
// ErrUnavailable and ErrClosed.
func testHealth(t *testing.T, s storage.Store) {
	h, ok := s.(storage.HealthReporter)
	if !ok {
		t.Skipf("%T does not implement storage.HealthReporter", s)
	}
	if err := h.Health(); err != nil {
		t.Fatalf("Health of a fresh store = %v, want nil", err)
	}
	mustSet(t, s, kv{"k", "v"})
	if err := h.Health(); err != nil {
		t.Fatalf("Health after a write = %v, want nil", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := h.Health(); !errors.Is(err, storage.ErrUnavailable) || !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("Health after Close = %v, want ErrUnavailable and ErrClosed", err)
	}
}

func testErrClosed(t *testing.T, s storage.Store) {
	mustSet(t, s, kv{"k", "v"})
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	b := &storage.Batch{Sync: true}
	b.Set([]byte("k2"), []byte("v2"))
	if err := s.Apply(b); !errors.Is(err, storage.ErrClosed) {
		t.Errorf("Apply after Close = %v, want ErrClosed", err)
	}
	if err := s.Apply(&storage.Batch{}); !errors.Is(err, storage.ErrClosed) {
		t.Errorf("Apply(empty) after Close = %v, want ErrClosed", err)
	}
	if _, err := s.Get([]byte("k")); !errors.Is(err, storage.ErrClosed) {
		t.Errorf("Get after Close = %v, want ErrClosed", err)
	}
	called := false
	err := s.Scan(nil, nil, func(_, _ []byte) (bool, error) {
		called = true
		return true, nil
	})
	if !errors.Is(err, storage.ErrClosed) || called {
		t.Errorf("Scan after Close = %v (callback called: %t), want ErrClosed", err, called)
	}
	if err := s.Close(); !errors.Is(err, storage.ErrClosed) {
		t.Errorf("second Close = %v, want ErrClosed", err)
	}
}

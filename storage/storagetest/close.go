package storagetest

import (
	"errors"
	"testing"

	"github.com/omnibusmq/omnibus/storage"
)

var closeTests = []test{
	{"ErrClosed", testErrClosed},
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

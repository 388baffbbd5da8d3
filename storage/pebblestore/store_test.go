package pebblestore_test

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
	"github.com/omnibusmq/omnibus/storage/storagetest"
	"go.uber.org/zap/zaptest"
)

func TestSuite(t *testing.T) {
	storagetest.RunSuite(t, func(t *testing.T) storage.Store {
		return mustOpen(t, "db", pebblestore.Options{FS: vfs.NewMem(), Logger: zaptest.NewLogger(t)})
	})
}

// mustOpen opens a store and fails the test on error.
func mustOpen(t testing.TB, dir string, opts pebblestore.Options) *pebblestore.Store {
	t.Helper()
	s, err := pebblestore.Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%q): %v", dir, err)
	}
	return s
}

func newMemFS() vfs.FS { return vfs.NewMem() }

package memstore_test

import (
	"testing"

	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/memstore"
	"github.com/omnibusmq/omnibus/storage/storagetest"
)

func TestSuite(t *testing.T) {
	storagetest.RunSuite(t, func(t *testing.T) storage.Store { return memstore.New() })
}

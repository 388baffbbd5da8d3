package coretest

import (
	"sync/atomic"
	"testing"

	"github.com/omnibusmq/omnibus/storage"
)

// CountingStore decorates a [storage.Store] and counts the calls made to
// it, so tests and benchmarks can show which paths touch storage.
type CountingStore struct {
	storage.Store
	Applies atomic.Int64 // Apply calls
	Syncs   atomic.Int64 // Apply calls with Sync set
	Gets    atomic.Int64 // Get calls
	Scans   atomic.Int64 // Scan calls
}

// Apply counts and forwards.
func (c *CountingStore) Apply(b *storage.Batch) error {
	c.Applies.Add(1)
	if b != nil && b.Sync {
		c.Syncs.Add(1)
	}
	return c.Store.Apply(b)
}

// Get counts and forwards.
func (c *CountingStore) Get(key []byte) ([]byte, error) {
	c.Gets.Add(1)
	return c.Store.Get(key)
}

// Scan counts and forwards.
func (c *CountingStore) Scan(prefix, start []byte, fn func(key, value []byte) (bool, error)) error {
	c.Scans.Add(1)
	return c.Store.Scan(prefix, start, fn)
}

// Reads returns the number of Get and Scan calls so far.
func (c *CountingStore) Reads() int64 { return c.Gets.Load() + c.Scans.Load() }

// NewCounting returns a broker on a memstore (kept across restarts) seen
// through a CountingStore, and that store.
func NewCounting(t testing.TB) (*Env, *CountingStore) {
	t.Helper()
	cs := &CountingStore{}
	env := NewWith(t, func(t testing.TB, prev storage.Store) storage.Store {
		if prev == nil {
			cs.Store = MemOpener(t, nil)
		}
		return cs
	})
	return env, cs
}

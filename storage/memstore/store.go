// Package memstore is the reference, in-memory implementation of
// [storage.Store].
//
// It keeps every key in a persistent (copy-on-write) treap: Apply builds a
// new version of the tree off to the side and publishes it with one atomic
// pointer store, so a batch is visible all at once or not at all, and Get and
// Scan read a snapshot without taking any lock. A Scan therefore sees the
// store as it was when the Scan began, exactly like an iterator on Pebble,
// and its callback may call back into the store (Get, Apply) freely.
//
// As the reference, it checks what other stores cannot: a
// [storage.Batch.DeleteOnce] of a key set more than once since its last
// deletion fails the batch (ErrDeleteOnceMisuse) instead of being applied,
// and so does a [storage.Batch.SetNew] of a key that holds a value
// (ErrSetNewMisuse).
//
// Finding a key, or the start of a Scan, costs O(log n); DeletePrefix costs
// O(log n) however many keys it removes. Nothing is ever written to disk, so
// [storage.Batch.Sync] is a no-op.
package memstore

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/omnibusmq/omnibus/storage"
)

// ErrDeleteOnceMisuse is wrapped by the error Apply returns, applying
// nothing of the batch, when a [storage.Batch.DeleteOnce] meets a key that
// was set more than once since its last deletion: a caller's bug that
// Pebble would turn into an older value coming back.
var ErrDeleteOnceMisuse = errors.New("memstore: DeleteOnce of a key set more than once since its last deletion")

// ErrSetNewMisuse is wrapped by the error Apply returns, applying nothing
// of the batch, when a [storage.Batch.SetNew] meets a key that holds a
// value: a caller's bug that would let a store merging held writes drop
// the key's later deletion and keep the older value.
var ErrSetNewMisuse = errors.New("memstore: SetNew of a key that holds a value")

// Store is an in-memory [storage.Store]. The zero value is not usable; call
// [New].
type Store struct {
	// root is the current version of the tree. Readers load it without
	// locks; only Apply and Close, holding mu, store it.
	root   atomic.Pointer[node]
	closed atomic.Bool

	// mu serializes writers (Apply, Close) so that each builds on the
	// version the previous one published.
	mu sync.Mutex
}

var (
	_ storage.Store          = (*Store)(nil)
	_ storage.HealthReporter = (*Store)(nil)
)

// New returns an empty store.
func New() *Store {
	return &Store{}
}

// Apply implements [storage.Store]. Keys and values are copied, so the caller
// may reuse b as soon as Apply returns. A batch holding an unknown
// [storage.OpKind] is rejected whole and changes nothing. A nil batch is an
// empty one.
func (s *Store) Apply(b *storage.Batch) error {
	if b == nil {
		b = &storage.Batch{}
	}
	for i, op := range b.Ops {
		switch op.Kind {
		case storage.OpSet, storage.OpDelete, storage.OpDeletePrefix, storage.OpDeleteOnce:
		default:
			return fmt.Errorf("memstore: op %d: unknown kind %d", i, op.Kind)
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return storage.ErrClosed
	}
	root := s.root.Load()
	for _, op := range b.Ops {
		switch op.Kind {
		case storage.OpSet:
			// The reference checks the caller's side of SetNew, which
			// only a store that merges held writes relies on.
			if op.New && get(root, op.Key) != nil {
				return fmt.Errorf("%w: key %q (nothing of the batch was applied)", ErrSetNewMisuse, op.Key)
			}
			root = insert(root, clone(op.Key), clone(op.Value))
		case storage.OpDelete:
			root = remove(root, op.Key)
		case storage.OpDeletePrefix:
			root = removePrefix(root, op.Key)
		case storage.OpDeleteOnce:
			// The reference checks the caller's side of DeleteOnce, which
			// Pebble cannot: a key set twice since its last deletion
			// would show its older value again there.
			if n := get(root, op.Key); n != nil && n.overwritten {
				return fmt.Errorf("%w: key %q (nothing of the batch was applied)", ErrDeleteOnceMisuse, op.Key)
			}
			root = remove(root, op.Key)
		}
	}
	s.root.Store(root)
	return nil
}

// Get implements [storage.Store].
func (s *Store) Get(key []byte) ([]byte, error) {
	// Load the root before checking closed: Close clears closed-then-root,
	// so a root loaded while the store was open is a real version.
	root := s.root.Load()
	if s.closed.Load() {
		return nil, storage.ErrClosed
	}
	n := get(root, key)
	if n == nil {
		return nil, storage.ErrNotFound
	}
	return clone(n.value), nil
}

// Scan implements [storage.Store]. It reads the snapshot current when it was
// called. The slices passed to fn live in one buffer reused from call to call,
// as Pebble's iterator buffers are, so a caller that wrongly keeps them past
// the callback sees them change here too, not only in production.
func (s *Store) Scan(prefix, start []byte, fn func(key, value []byte) (bool, error)) error {
	root := s.root.Load() // before the closed check, as in Get
	if s.closed.Load() {
		return storage.ErrClosed
	}
	lo := prefix
	if string(start) > string(prefix) {
		lo = start
	}
	var it iter
	it.seek(root, lo)
	var buf []byte
	for n := it.next(); n != nil; n = it.next() {
		if !bytes.HasPrefix(n.key, prefix) {
			// Keys with the prefix are contiguous and lo is among or
			// before them: the first key without it ends the range.
			return nil
		}
		buf = append(append(buf[:0], n.key...), n.value...)
		key, value := buf[:len(n.key):len(n.key)], buf[len(n.key):]
		more, err := fn(key, value)
		if err != nil {
			return err
		}
		if !more {
			return nil
		}
	}
	return nil
}

// Close implements [storage.Store]. It drops every key; a second Close
// returns [storage.ErrClosed].
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return storage.ErrClosed
	}
	s.closed.Store(true)
	s.root.Store(nil) // after closed: see Get

	return nil
}

// clone returns a copy of b that shares no memory with it; it is never nil.
func clone(b []byte) []byte {
	c := make([]byte, len(b))
	copy(c, b)
	return c
}

// Health implements [storage.HealthReporter]. A store in memory has no disk
// to fail: it accepts writes until it is closed.
func (s *Store) Health() error {
	if s.closed.Load() {
		return fmt.Errorf("%w: %w", storage.ErrUnavailable, storage.ErrClosed)
	}
	return nil
}
